// A pruned draft vocabulary as a user builds and uses it, on a tiny random checkpoint with the
// GPT-2-style tokenizer fixture: `count-vocab` on the calibration prompts writes the ids most
// frequent first; `bench --draft-vocab F --draft-vocab-size 0,N` compares the full and the pruned
// draft head in one run, losslessly; `generate` with it gives the plain output at TP 1 and under
// mpirun -np 2 with --debug-sync; every bad file or value is refused naming the option.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);

class DraftVocabCli : public Cli {
 protected:
  void SetUp() override {
    model_ = dir_ / "m";
    const CommandResult made = run(fmt::format(
        "make-model --out {} --layers 3 --hidden 64 --heads 8 --kv-heads 2 --intermediate 100 "
        "--vocab 1210 --seed 11",
        model_.string()));
    ASSERT_EQ(made.exit_code, 0) << made.err;
    tokenizer_ = kSource / "tests/data/tokenizer/gpt2_style.tokenizer.json";
    std::string text;
    const auto add = [&](const std::string& id, const std::string& split,
                         const std::string& prompt) {
      text += nlohmann::json{{"id", id}, {"task", "chat"}, {"split", split}, {"prompt", prompt}}
                  .dump() +
              "\n";
    };
    add("a", "calibration", "Hello! How are you today?");
    add("b", "calibration", "Tell me about the sea and the sky.");
    add("c", "evaluation", "Can you suggest a name for my cat?");
    add("d", "evaluation", "What colour is the sky?");
    suite_ = dir_ / "suite.jsonl";
    std::ofstream(suite_) << text;
  }

  std::string model_args() const {
    return fmt::format("--model {} --tokenizer {}", model_.string(), tokenizer_.string());
  }
  std::filesystem::path count(const std::string& extra = "") {
    const auto out = dir_ / "vocab.json";
    const CommandResult r =
        run(fmt::format("count-vocab {} --prompts-file {} --generate 6 --out {} --json {}",
                        model_args(), suite_.string(), out.string(), extra));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
  }
  std::string generate(const std::string& extra) const {
    return fmt::format(
        "generate {} --prompt 'the sea and the sky' --max-new-tokens 16 --ignore-eos --json "
        "--spec layer-skip --skip-uniform 0.3 {}",
        model_args(), extra);
  }

  std::filesystem::path model_, tokenizer_, suite_;
};

TEST_F(DraftVocabCli, CountVocabWritesIdsMostFrequentFirstFromTheCalibrationSplit) {
  const auto file = count();
  const nlohmann::json vocab = nlohmann::json::parse(read_file(file));
  EXPECT_EQ(vocab["model"], model_.string());
  EXPECT_THAT(vocab["source"].get<std::string>(), HasSubstr("split calibration"));
  EXPECT_THAT(vocab["source"].get<std::string>(), HasSubstr("2 prompts"));
  const auto ids = vocab["ids"].get<std::vector<std::int32_t>>();
  const auto counts = vocab["counts"].get<std::vector<std::int64_t>>();
  ASSERT_EQ(ids.size(), 1210u);  // every id: the unseen ones last, in id order
  ASSERT_EQ(counts.size(), ids.size());
  EXPECT_EQ(std::set<std::int32_t>(ids.begin(), ids.end()).size(), ids.size());
  EXPECT_GT(counts[0], 0);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(counts[i - 1], counts[i]) << i;
      if (counts[i - 1] == counts[i]) {
        EXPECT_LT(ids[i - 1], ids[i]) << i;
      }
    }
    EXPECT_LT(ids[i], 1210);
    total += counts[i];
  }
  EXPECT_EQ(vocab["tokens_counted"], total);
  // Prompt tokens plus 6 generated per prompt: more than the prompts alone.
  const CommandResult prompts_only =
      run(fmt::format("count-vocab {} --prompts-file {} --generate 0 --out {} --json", model_args(),
                      suite_.string(), (dir_ / "p.json").string()));
  ASSERT_EQ(prompts_only.exit_code, 0) << prompts_only.err;
  EXPECT_EQ(prompts_only.json()["tokens_counted"].get<std::int64_t>() + 12, total);
  // Open text adds its ids (tokenized only) and says so in the source.
  std::ofstream(dir_ / "open.txt") << "the sea and the sky and the sea";
  const auto with_text = dir_ / "t.json";
  const CommandResult text_run = run(
      fmt::format("count-vocab {} --prompts-file {} --generate 0 --open-text-files {} --out {} "
                  "--json",
                  model_args(), suite_.string(), (dir_ / "open.txt").string(), with_text.string()));
  ASSERT_EQ(text_run.exit_code, 0) << text_run.err;
  EXPECT_GT(text_run.json()["tokens_counted"].get<std::int64_t>(),
            prompts_only.json()["tokens_counted"].get<std::int64_t>());
  EXPECT_THAT(nlohmann::json::parse(read_file(with_text))["source"].get<std::string>(),
              HasSubstr("tokens of open text from 1 files"));
  // Several prompts per forward count the same tokens.
  for (int batch : {1, 3}) {
    const auto batched = dir_ / fmt::format("b{}.json", batch);
    const CommandResult r =
        run(fmt::format("count-vocab {} --prompts-file {} --generate 6 --batch {} --out {}",
                        model_args(), suite_.string(), batch, batched.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json again = nlohmann::json::parse(read_file(batched));
    EXPECT_EQ(again["ids"], vocab["ids"]) << "--batch " << batch;
    EXPECT_EQ(again["counts"], vocab["counts"]) << "--batch " << batch;
  }
}

TEST_F(DraftVocabCli, BenchComparesFullAndPrunedHeadsLosslessly) {
  const auto file = count();
  const CommandResult r = run(fmt::format(
      "bench {} --prompts-file {} --gen 8 --spec layer-skip --skip-uniform 0.3 --draft-vocab {} "
      "--draft-vocab-size 0,5 --json",
      model_args(), suite_.string(), file.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["draft_vocab"], 0);
  EXPECT_GE(j["results"][1]["draft_vocab"].get<int>(), 5);  // + EOS ids not among the 5
  EXPECT_LE(j["results"][1]["draft_vocab"].get<int>(), 7);
  for (const auto& result : j["results"]) EXPECT_EQ(result["overall"]["lossless_prompts"], 2);
  EXPECT_THAT(r.err, HasSubstr("draft vocabulary full"));
}

TEST_F(DraftVocabCli, GenerateWithAPrunedDraftHeadGivesThePlainOutputAtTp1AndTp2) {
  const auto file = count();
  const CommandResult plain = run(generate(""));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto expected = plain.json()["tokens"];
  // A skip set carrying the ids: the same output, and V' = all of them (+ EOS).
  const nlohmann::json vocab = nlohmann::json::parse(read_file(file));
  const auto skips = dir_ / "skips.json";
  std::ofstream(skips)
      << nlohmann::json{{"attention", {1}}, {"mlp", {1}}, {"draft_vocab", vocab["ids"]}}.dump();
  const CommandResult from_set = run(fmt::format(
      "generate {} --prompt 'the sea and the sky' --max-new-tokens 16 --ignore-eos --json "
      "--spec layer-skip --skip-config {}",
      model_args(), skips.string()));
  ASSERT_EQ(from_set.exit_code, 0) << from_set.err;
  EXPECT_EQ(from_set.json()["tokens"], expected);
  EXPECT_GE(from_set.json()["spec"]["draft_vocab"].get<std::size_t>(), vocab["ids"].size());
  for (const int ranks : {0, 2}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const CommandResult r = run(
        generate(fmt::format("--draft-vocab {} --draft-vocab-size 8 --debug-sync", file.string())),
        ranks, 240);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.json()["tokens"], expected) << "ranks " << ranks;
    EXPECT_GE(r.json()["spec"]["draft_vocab"].get<int>(), 8);
  }
}

TEST_F(DraftVocabCli, BadFilesAndValuesAreRefusedNamingTheOption) {
  const auto file = count();
  const auto write = [&](const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  };
  expect_error(run(generate("--draft-vocab " + (dir_ / "missing.json").string())), "--draft-vocab");
  expect_error(run(generate("--draft-vocab " + write("bad.json", "{\"ids\": [1, 2"))),
               "--draft-vocab");
  expect_error(run(generate("--draft-vocab " + write("noids.json", "{\"counts\": []}"))),
               "missing key 'ids'");
  expect_error(
      run(generate("--draft-vocab " + write("twice.json", R"({"ids": [4, 4], "counts": [2, 1]})"))),
      "ids[1] = 4 is listed twice");
  expect_error(run(generate("--draft-vocab " +
                            write("beyond.json", R"({"ids": [4, 5000], "counts": [2, 1]})"))),
               "token id 5000 is outside the model's vocabulary [0, 1210)");
  expect_error(
      run(generate(fmt::format("--draft-vocab {} --draft-vocab-size 100000", file.string()))),
      "--draft-vocab-size 100000 is outside");
  expect_error(run(generate(fmt::format("--draft-vocab {} --draft-vocab-size -3", file.string()))),
               "--draft-vocab-size");
  expect_error(run(generate(fmt::format("--draft-vocab {} --draft-vocab-size 4,8", file.string()))),
               "--draft-vocab-size");
  expect_error(run(generate("--draft-vocab-size 8")), "--draft-vocab-size needs");
  expect_error(
      run(fmt::format("generate {} --prompt x --draft-vocab {}", model_args(), file.string())),
      "need self-speculative decoding");
}

}  // namespace
}  // namespace selfspec::testing
