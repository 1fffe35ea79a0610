// `selfspec bench --prompts-file` as a user runs it, on a tiny random checkpoint with the
// GPT-2-style tokenizer fixture: per-task and overall medians with the documented JSON fields,
// one record per prompt, the lossless check, the selection options, errors that name the file,
// line and key (or the option), the shipped prompt sets, and scripts/plot_bench.py on the result.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);

class BenchSuite : public Cli {
 protected:
  // make_model's geometry with vocab 1210, which holds the tokenizer fixture's 1205 ids.
  void SetUp() override {
    model_ = dir_ / "m";
    const CommandResult made = run(fmt::format(
        "make-model --out {} --layers 3 --hidden 64 --heads 8 --kv-heads 2 --intermediate 100 "
        "--vocab 1210 --seed 11",
        model_.string()));
    ASSERT_EQ(made.exit_code, 0) << made.err;
    tokenizer_ = kSource / "tests/data/tokenizer/gpt2_style.tokenizer.json";
  }

  std::filesystem::path write_suite(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path;
  }

  // Two chat, two qa and one maths prompt in the evaluation split, one of each in calibration.
  std::filesystem::path small_suite() {
    std::string text;
    const auto add = [&](const std::string& id, const std::string& task, const std::string& split,
                         const std::string& prompt) {
      text +=
          nlohmann::json{{"id", id}, {"task", task}, {"split", split}, {"prompt", prompt}}.dump() +
          "\n";
    };
    add("chat-a", "chat", "calibration", "Hello! How are you today?");
    add("chat-b", "chat", "evaluation", "Can you suggest a name for my cat?");
    add("chat-c", "chat", "evaluation", "Tell me a joke about the weather.");
    add("qa-a", "qa", "calibration", "Question: What is 2 + 2?\nAnswer:");
    add("qa-b", "qa", "evaluation", "Question: What colour is the sky?\nAnswer:");
    add("qa-c", "qa", "evaluation", "Question: Where is Paris?\nAnswer:");
    add("maths-a", "maths", "calibration", "Solve: 3 x 4 = ?");
    add("maths-b", "maths", "evaluation", "A train goes 60 km in one hour. How far in 3 hours?");
    return write_suite("suite.jsonl", text);
  }

  std::string bench(const std::filesystem::path& suite, const std::string& extra = "") {
    return fmt::format(
        "bench --model {} --tokenizer {} --prompts-file {} --gen 8 --spec layer-skip "
        "--skip-uniform 0.3 {}",
        model_.string(), tokenizer_.string(), suite.string(), extra);
  }

  static std::vector<std::string> prompt_ids(const nlohmann::json& j) {
    std::vector<std::string> ids;
    for (const auto& record : j["per_prompt"]) ids.push_back(record["id"].get<std::string>());
    return ids;
  }

  std::filesystem::path model_;
  std::filesystem::path tokenizer_;
};

TEST_F(BenchSuite, ReportsPerTaskMediansAndOneRecordPerPrompt) {
  const CommandResult r =
      run(bench(small_suite(), "--ignore-eos --controller adaptive,fixed --max-draft 3 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  EXPECT_EQ(j["split"], "evaluation");
  EXPECT_EQ(j["tasks"], (nlohmann::json{"chat", "qa", "maths"}));
  EXPECT_EQ(j["prompts"], 5);
  EXPECT_EQ(j["finished_prompts"], 5);
  EXPECT_EQ(j["lossless_mismatches"], 0);
  EXPECT_EQ(j["model"], model_.string());
  EXPECT_EQ(j["spec"]["drafter"], "layer-skip");
  EXPECT_TRUE(j["spec"].contains("skip_set"));
  EXPECT_EQ(j["controller_options"]["max_draft"], 3);
  EXPECT_FALSE(j["interrupted"]);
  ASSERT_EQ(j["results"].size(), 2u) << "one entry per controller";
  EXPECT_EQ(j["results"][0]["controller"], "adaptive");
  EXPECT_EQ(j["results"][1]["controller"], "fixed");
  for (const auto& result : j["results"]) {
    ASSERT_EQ(result["per_task"].size(), 3u);
    EXPECT_EQ(result["per_task"]["chat"]["prompts"], 2);
    EXPECT_EQ(result["per_task"]["maths"]["prompts"], 1);
    EXPECT_EQ(result["overall"]["prompts"], 5);
    EXPECT_EQ(result["overall"]["lossless_prompts"], 5);
    for (const char* key : {"autoregressive_tokens_per_s", "speculative_tokens_per_s", "speedup",
                            "acceptance_rate", "mean_accepted_length", "cost_ratio_c",
                            "expected_speedup_eq6", "efficiency", "measured_prompts"}) {
      EXPECT_TRUE(result["overall"].contains(key)) << key;
    }
    EXPECT_GT(result["overall"]["autoregressive_tokens_per_s"].get<double>(), 0.0);
    EXPECT_GE(result["overall"]["mean_accepted_length"].get<double>(), 1.0);
  }
  EXPECT_EQ(prompt_ids(j),
            (std::vector<std::string>{"chat-b", "chat-c", "qa-b", "qa-c", "maths-b"}));
  for (const auto& record : j["per_prompt"]) {
    EXPECT_EQ(record["split"], "evaluation");
    EXPECT_GT(record["prompt_tokens"].get<int>(), 1);
    EXPECT_EQ(record["generated_tokens"], 8) << "--ignore-eos generates --gen tokens";
    ASSERT_EQ(record["speculative"].size(), 2u);
    for (const auto& spec : record["speculative"]) {
      EXPECT_TRUE(spec["lossless"].get<bool>()) << record["id"];
      EXPECT_TRUE(spec.contains("acceptance_rate"));
    }
  }
  // The tables (stderr with --json) and the progress lines.
  EXPECT_THAT(r.err, HasSubstr("controller adaptive, logits local"));
  EXPECT_THAT(r.err, HasSubstr("overall"));
  EXPECT_THAT(r.err, HasSubstr("prompt 5/5 (maths maths-b)"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("(medians over prompts)")))
      << "with --json stdout carries the JSON object only";
}

TEST_F(BenchSuite, TheTablePrintsOnStdoutAndRunRecordsNameThePrompt) {
  const auto jsonl = dir_ / "runs.jsonl";
  const CommandResult r = run(
      bench(small_suite(), fmt::format("--tasks qa --ignore-eos --out-jsonl {}", jsonl.string())));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("task"));
  EXPECT_THAT(r.out, HasSubstr("qa"));
  EXPECT_THAT(r.out, HasSubstr("overall"));
  EXPECT_THAT(r.out, HasSubstr("2/2")) << "the lossless column";
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("chat")));
  std::ifstream in(jsonl);
  std::string line;
  std::set<std::string> tagged;
  while (std::getline(in, line)) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record["record"] == "run") tagged.insert(record["id"].get<std::string>());
  }
  EXPECT_EQ(tagged, (std::set<std::string>{"qa-b", "qa-c"}));
}

// Suite prompts stop where the model ends them: a copy of the model whose end-of-sequence id is
// the 3rd token it generates for the prompt stops there, speculative decoding included.
TEST_F(BenchSuite, GenerationStopsAtTheModelsEndOfSequence) {
  const std::string text = "A train goes 60 km in one hour. How far in 3 hours?";
  const CommandResult plain = run(fmt::format(
      "generate --model {} --tokenizer {} --prompt '{}' --max-new-tokens 8 --ignore-eos --json",
      model_.string(), tokenizer_.string(), text));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::vector<int> tokens = plain.json()["tokens"].get<std::vector<int>>();
  ASSERT_EQ(tokens.size(), 8u);
  const auto first = std::find(tokens.begin(), tokens.end(), tokens[2]) - tokens.begin();

  const auto eos_model = dir_ / "eos";
  std::filesystem::copy(model_, eos_model, std::filesystem::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(read_file(eos_model / "config.json"));
  config["eos_token_id"] = tokens[2];
  std::ofstream(eos_model / "config.json", std::ios::trunc) << config.dump(2);
  const auto suite = write_suite(
      "one.jsonl",
      nlohmann::json{{"id", "t"}, {"task", "maths"}, {"split", "evaluation"}, {"prompt", text}}
              .dump() +
          "\n");
  const CommandResult r =
      run(fmt::format("bench --model {} --tokenizer {} --prompts-file {} --gen 8 --spec layer-skip "
                      "--skip-uniform 0.3 --json",
                      eos_model.string(), tokenizer_.string(), suite.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json record = r.json()["per_prompt"][0];
  EXPECT_TRUE(record["stopped_on_eos"].get<bool>());
  EXPECT_EQ(record["generated_tokens"].get<int>(), first + 1);
  EXPECT_TRUE(record["speculative"][0]["lossless"].get<bool>());
  EXPECT_EQ(r.json()["lossless_mismatches"], 0);
}

TEST_F(BenchSuite, SplitTasksAndLimitSelectThePrompts) {
  const auto suite = small_suite();
  CommandResult r = run(bench(suite, "--split calibration --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(prompt_ids(r.json()), (std::vector<std::string>{"chat-a", "qa-a", "maths-a"}));
  r = run(bench(suite, "--split all --tasks chat,maths --max-prompts-per-task 2 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(prompt_ids(r.json()),
            (std::vector<std::string>{"chat-a", "chat-b", "maths-a", "maths-b"}));
  EXPECT_EQ(r.json()["tasks"], (nlohmann::json{"chat", "maths"}));
}

TEST_F(BenchSuite, BadFilesAndOptionsAreRefusedByName) {
  const auto suite = small_suite();
  const auto bad = write_suite(
      "bad.jsonl",
      "{\"id\": \"a\", \"task\": \"qa\", \"split\": \"evaluation\", \"prompt\": \"x\"}\n"
      "{\"id\": \"b\", \"task\": \"qa\", \"split\": \"evaluation\"}\n");
  CommandResult r = run(bench(bad));
  expect_error(r, bad.string() + ":2: missing key 'prompt'");
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("loading weights")));
  expect_error(run(bench(write_suite("task.jsonl",
                                     "{\"id\": \"a\", \"task\": \"poems\", "
                                     "\"split\": \"evaluation\", \"prompt\": \"x\"}\n"))),
               "task.jsonl:1: key 'task' is 'poems'");
  expect_error(run(bench(suite, "--tasks code")), "task 'code' in split 'evaluation'");
  expect_error(run(bench(suite, "--tasks essays")), "--tasks");
  expect_error(run(bench(suite, "--split test")), "--split");
  expect_error(run(bench(suite, "--prompt-len 8")), "--prompt-len");
  expect_error(run(fmt::format("bench --model {} --split calibration", model_.string())),
               "--prompts-file");
  expect_error(run(fmt::format("bench --model {} --tokenizer {} --prompts-file {}", model_.string(),
                               tokenizer_.string(), suite.string())),
               "--spec layer-skip");
  expect_error(run(fmt::format("bench --model {} --prompts-file {} --spec layer-skip "
                               "--skip-uniform 0.3",
                               model_.string(), suite.string())),
               "needs a tokenizer");
  expect_error(run(bench(suite, "--ctx-size 12")), "prompt 'chat-b'");
  expect_error(run(bench(dir_ / "missing.jsonl")), "missing.jsonl");
}

// The shipped sets run end to end, and scripts/plot_bench.py turns the JSON into its plots (when
// a python3 with matplotlib is installed: scripts/setup.sh installs Debian's).
TEST_F(BenchSuite, ShippedSetsRunAndPlot) {
  const auto prompts = kSource / "bench/prompts";
  std::string files;
  for (const char* set : {"chat", "summarisation", "qa", "maths"}) {
    files += fmt::format("{}{}", files.empty() ? "" : ",", (prompts / set).string() + ".jsonl");
  }
  const auto out = dir_ / "bench.json";
  const CommandResult r = run(fmt::format(
      "bench --model {} --tokenizer {} --prompts-file {} --max-prompts-per-task 1 --gen 4 "
      "--spec layer-skip --skip-uniform 0.3 --ignore-eos --out {}",
      model_.string(), tokenizer_.string(), files, out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read_file(out));
  EXPECT_EQ(prompt_ids(j),
            (std::vector<std::string>{"chat-02", "summarisation-02", "qa-02", "maths-02"}));

  std::string python;
  for (const char* candidate : {"python3", "/usr/bin/python3"}) {
    const std::string probe = fmt::format("{} -c 'import matplotlib' >/dev/null 2>&1", candidate);
    if (std::system(probe.c_str()) == 0) {
      python = candidate;
      break;
    }
  }
  if (python.empty()) GTEST_SKIP() << "no python3 with matplotlib (scripts/setup.sh installs it)";
  const auto plots = dir_ / "plots";
  const std::string plot = fmt::format("{} {} --out {} {} >{} 2>&1", python,
                                       (kSource / "scripts/plot_bench.py").string(), plots.string(),
                                       out.string(), (dir_ / "plot.log").string());
  ASSERT_EQ(std::system(plot.c_str()), 0) << read_file(dir_ / "plot.log");
  int pngs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(plots)) {
    EXPECT_EQ(entry.path().extension(), ".png");
    EXPECT_GT(std::filesystem::file_size(entry.path()), 1000u) << entry.path();
    ++pngs;
  }
  EXPECT_EQ(pngs, 4) << "speedup, acceptance, tokens/s and the α-c frontier";
}

}  // namespace
}  // namespace selfspec::testing
