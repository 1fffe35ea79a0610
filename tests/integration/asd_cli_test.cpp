// `--spec asd` (Draft on the Fly) as users run it: generate's greedy output equals autoregressive
// output at TP 1 and under mpirun -np 2 with --debug-sync, and its JSON shows the chosen skip set
// and the cosines per layer; bench --prompts-file reports each prompt's choice; option errors name
// the option.
#include "tests/integration/cli_fixture.hpp"

#include <gtest/gtest.h>

namespace selfspec::testing {
namespace {

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);

class AsdCli : public Cli {
 protected:
  // Six layers (Table 2's m = 3, n = 2 then have layer 2 to remove by rule 1); vocab 1210 holds
  // the GPT-2-style tokenizer fixture's ids.
  void SetUp() override {
    model_ = dir_ / "m";
    const CommandResult made = run(fmt::format(
        "make-model --out {} --layers 6 --hidden 64 --heads 8 --kv-heads 2 --intermediate 100 "
        "--vocab 1210 --seed 11",
        model_.string()));
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  std::string generate(const std::string& extra) const {
    return fmt::format(
        "generate --model {} --prompt-ids 1,17,4,200,33,90,7,512 --max-new-tokens 24 "
        "--ignore-eos --json {}",
        model_.string(), extra);
  }
  std::filesystem::path model_;
};

TEST_F(AsdCli, GenerateMatchesAutoregressiveAtTp1And2AndReportsItsChoice) {
  const CommandResult ar = run(generate(""));
  ASSERT_EQ(ar.exit_code, 0) << ar.err;
  for (int ranks : {0, 2}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const CommandResult r =
        run(generate("--spec asd --asd-alpha 0.9 --max-draft 4 --debug-sync"), ranks);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = r.json();
    EXPECT_EQ(j["tokens"], ar.json()["tokens"]) << "np " << ranks;
    EXPECT_EQ(j["spec"]["drafter"], "asd");
    EXPECT_EQ(j["spec"]["asd"]["alpha"], 0.9);
    EXPECT_EQ(j["spec"]["asd"]["m"], 3);
    EXPECT_EQ(j["spec"]["asd"]["n"], 2);
    const nlohmann::json& state = j["spec"]["drafter_state"];
    EXPECT_EQ(state["acs"].size(), 6u);
    EXPECT_EQ(state["prompt_tokens"], 8);
    const nlohmann::json& skips = state["skip_set"];
    // Rule 1 removes layer 2 (1-based 3) whatever the cosines; rule 2 protects layers 4 and 5.
    EXPECT_NE(std::find(skips["mlp"].begin(), skips["mlp"].end(), 2), skips["mlp"].end());
    for (const auto& layer : skips["attention"]) EXPECT_LT(layer.get<int>(), 4);
    EXPECT_GT(j["drafted"].get<int>(), 0);
  }
}

TEST_F(AsdCli, BenchReportsEachPromptsSkipSet) {
  const auto suite = dir_ / "suite.jsonl";
  std::ofstream(suite)
      << R"({"id": "a", "task": "chat", "split": "evaluation", "prompt": "Hello! How are you?"})"
      << "\n"
      << R"({"id": "b", "task": "qa", "split": "evaluation", "prompt": "Question: Why?\nAnswer:"})"
      << "\n";
  const CommandResult r = run(fmt::format(
      "bench --model {} --tokenizer {} --prompts-file {} --gen 8 --ignore-eos --spec asd --json",
      model_.string(), (kSource / "tests/data/tokenizer/gpt2_style.tokenizer.json").string(),
      suite.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  EXPECT_EQ(j["spec"]["drafter"], "asd");
  EXPECT_EQ(j["spec"]["asd"]["alpha"], 0.985);
  EXPECT_EQ(j["lossless_mismatches"], 0);
  ASSERT_EQ(j["per_prompt"].size(), 2u);
  for (const auto& record : j["per_prompt"]) {
    const nlohmann::json& state = record["speculative"][0]["drafter_state_last_prompt"];
    EXPECT_EQ(state["acs"].size(), 6u) << record["id"];
    EXPECT_EQ(state["prompt_tokens"], record["prompt_tokens"]) << record["id"];
    EXPECT_TRUE(state["skip_set"].contains("attention"));
  }
  EXPECT_THAT(r.err, ::testing::HasSubstr("chosen per prompt"));
}

TEST_F(AsdCli, OptionErrorsNameTheOption) {
  const std::string base = generate("");
  expect_error(run(base + " --spec asd --asd-alpha 1.5"), "--asd-alpha");
  expect_error(run(base + " --spec asd --asd-m 0"), "--asd-m");
  expect_error(run(base + " --spec asd --asd-n 7"), "--asd-n");
  expect_error(run(base + " --asd-alpha 0.9"), "need --spec asd");
  expect_error(run(base + " --spec asd --skip-attn 1"), "--spec asd chooses");
}

}  // namespace
}  // namespace selfspec::testing
