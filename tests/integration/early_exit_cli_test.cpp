// EESD end to end as a user runs it, on a tiny made-up model: `collect-exit-data` on calibration
// prompts, `scripts/train_exit_head.py` on that data (skipped when /usr/bin/python3 has no torch),
// then `generate --spec early-exit --exit-head` with the untrained head (init_layer.safetensors)
// and the trained one: the plain output at TP 1 and under mpirun -np 2 with --debug-sync, chains
// and trees. A head made for another model, or options in the wrong combination, are refused
// naming the file or option.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace selfspec::testing {
namespace {

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);

class EarlyExitCli : public Cli {
 protected:
  void SetUp() override {
    model_ = make_model("m", 5);
    tokenizer_ = kSource / "tests/data/tokenizer/gpt2_style.tokenizer.json";
    std::string text;
    int id = 0;
    for (const char* prompt : {"Hello! How are you today?", "Tell me about the sea and the sky.",
                               "What colour is the sky?", "Name three birds of the sea."}) {
      text += nlohmann::json{{"id", std::to_string(id++)},
                             {"task", "chat"},
                             {"split", "calibration"},
                             {"prompt", prompt}}
                  .dump() +
              "\n";
    }
    suite_ = dir_ / "suite.jsonl";
    std::ofstream(suite_) << text;
  }
  std::filesystem::path make_model(const std::string& name, int seed) {
    const auto path = dir_ / name;
    const CommandResult made = run(fmt::format(
        "make-model --out {} --layers 4 --hidden 64 --heads 8 --kv-heads 2 --intermediate 100 "
        "--vocab 1210 --seed {}",
        path.string(), seed));
    EXPECT_EQ(made.exit_code, 0) << made.err;
    return path;
  }
  std::filesystem::path collect() {
    const auto out = dir_ / "data";
    const CommandResult r = run(fmt::format(
        "collect-exit-data --model {} --tokenizer {} --prompts-file {} --exit-layer 2 --top-k 8 "
        "--generate 24 --out {} --json",
        model_.string(), tokenizer_.string(), suite_.string(), out.string()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
  }
  std::string generate(const std::string& extra) const {
    return fmt::format(
        "generate --model {} --tokenizer {} --prompt 'the sea and the sky' --max-new-tokens 24 "
        "--ignore-eos --json {}",
        model_.string(), tokenizer_.string(), extra);
  }
  void expect_plain_output(const std::filesystem::path& head) {
    const CommandResult plain = run(generate(""));
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    for (const int ranks : {0, 2}) {
      for (const char* tree : {"none", "0.6:3,1:1"}) {
        const CommandResult r =
            run(generate(fmt::format("--spec early-exit --exit-head {} --tree {} --debug-sync",
                                     head.string(), tree)),
                ranks, 240);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const nlohmann::json out = r.json();
        EXPECT_EQ(out["tokens"], plain.json()["tokens"]) << "ranks " << ranks << " tree " << tree;
        EXPECT_EQ(out["spec"]["exit_head"]["exit_layer"], 2);
        EXPECT_GT(out["drafted"].get<int>(), 0);
      }
    }
  }
  std::filesystem::path model_, tokenizer_, suite_;
};

TEST_F(EarlyExitCli, TheUntrainedHeadDraftsLosslesslyAtTp1AndTp2) {
  const auto data = collect();
  expect_plain_output(data / "init_layer.safetensors");
}

TEST_F(EarlyExitCli, CollectTrainLoadDraft) {
  if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 has no torch (scripts/setup.sh installs python3-torch)";
  }
  const auto data = collect();
  const auto head = dir_ / "head.safetensors";
  const std::string train = fmt::format(
      "OMP_NUM_THREADS=1 timeout 120 /usr/bin/python3 {} {} --out {} --epochs 2 --batch 4 "
      "--negatives 64 --threads 1 --json > {} 2>&1",
      (kSource / "scripts/train_exit_head.py").string(), data.string(), head.string(),
      (dir_ / "train.log").string());
  ASSERT_EQ(std::system(train.c_str()), 0) << read_file(dir_ / "train.log");
  expect_plain_output(head);
}

// The trainer's layer is the engine's: with N = L - 1 the untrained head is the model's own last
// layer, so the trainer's draft must agree with the full model at every held-out position (the
// data's hidden states are BF16, the rest is exact enough not to flip an argmax here).
TEST_F(EarlyExitCli, TheTrainersLayerIsTheEnginesLayer) {
  if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 has no torch (scripts/setup.sh installs python3-torch)";
  }
  const auto data = dir_ / "data-last";
  const CommandResult collected = run(fmt::format(
      "collect-exit-data --model {} --tokenizer {} --prompts-file {} --exit-layer 3 --top-k 8 "
      "--generate 24 --out {}",
      model_.string(), tokenizer_.string(), suite_.string(), data.string()));
  ASSERT_EQ(collected.exit_code, 0) << collected.err;
  const auto summary = dir_ / "train.json";
  const std::string train = fmt::format(
      "OMP_NUM_THREADS=1 timeout 120 /usr/bin/python3 {} {} --out {} --epochs 1 --batch 4 "
      "--heldout 0.5 --threads 1 --json > {} 2> {}",
      (kSource / "scripts/train_exit_head.py").string(), data.string(),
      (dir_ / "last.safetensors").string(), summary.string(), (dir_ / "train.log").string());
  ASSERT_EQ(std::system(train.c_str()), 0) << read_file(dir_ / "train.log");
  const nlohmann::json result = nlohmann::json::parse(read_file(summary));
  EXPECT_EQ(result["agreement_before"].get<double>(), 1.0);
  EXPECT_GT(result["heldout_positions"].get<int>(), 20);
}

TEST_F(EarlyExitCli, AHeadForAnotherModelAndMisplacedOptionsAreRefused) {
  const auto data = collect();
  const auto other = make_model("other", 6);
  const CommandResult r = run(fmt::format(
      "generate --model {} --tokenizer {} --prompt x --max-new-tokens 4 --spec early-exit "
      "--exit-head {}",
      other.string(), tokenizer_.string(), (data / "init_layer.safetensors").string()));
  expect_error(r, "was made for another model");
  expect_error(run(generate("--spec early-exit")), "--exit-head");
  expect_error(run(generate("--spec layer-skip --skip-uniform 0.3 --exit-head " +
                            (data / "init_layer.safetensors").string())),
               "--exit-head");
  expect_error(
      run(generate("--spec early-exit --exit-head " + (data / "frozen.safetensors").string())),
      "frozen.safetensors");
}

}  // namespace
}  // namespace selfspec::testing
