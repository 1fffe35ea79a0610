// EAGLE-style feature-level drafting end to end as a user runs it, on a tiny made-up 4-layer model:
// `collect-exit-data --exit-layer 4` (the final residual) on calibration prompts,
// `scripts/train_feature_head.py` on that data (skipped when /usr/bin/python3 has no torch), then
// `generate --spec feature-head --feature-head` with the trained head: the plain output at TP 1
// and under mpirun -np 2 with --debug-sync, chains and trees, with --lookup, and with the head in
// bf16 or quantized at load. An exit head, a head made for another model and the options without
// --spec feature-head are refused naming the file or option.
#include "tests/integration/draft_head_cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace selfspec::testing {
namespace {

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);

class FeatureHeadCli : public DraftHeadCli {
 protected:
  // The feature head's data: exit layer L = 4, the final residual (init_layer.safetensors is then
  // an exit head of the last layer).
  std::filesystem::path collect() { return collect_at(4); }
  // Trains a feature head on `data`; returns dir_/head.safetensors (a failure, with the
  // trainer's log, when it fails: the callers stop on HasFailure()).
  std::filesystem::path train(const std::filesystem::path& data) {
    const auto head = dir_ / "head.safetensors";
    const std::string command = fmt::format(
        "OMP_NUM_THREADS=1 timeout 120 /usr/bin/python3 {} {} --out {} --epochs 2 --batch 4 "
        "--negatives 64 --threads 1 --json > {} 2>&1",
        (kSource / "scripts/train_feature_head.py").string(), data.string(), head.string(),
        (dir_ / "train.log").string());
    EXPECT_EQ(std::system(command.c_str()), 0) << read_file(dir_ / "train.log");
    return head;
  }
};

TEST_F(FeatureHeadCli, CollectTrainLoadDraft) {
  if (!torch_available()) {
    GTEST_SKIP() << "/usr/bin/python3 has no torch (scripts/setup.sh installs python3-torch)";
  }
  const auto data = collect();
  const auto head = train(data);
  ASSERT_FALSE(HasFailure());
  const CommandResult plain = run(generate(""));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;

  // With lookups: the rounds without a match draft with the head.
  const CommandResult looked = run(generate(
      fmt::format("--spec feature-head --feature-head {} --lookup 2 --debug-sync", head.string())));
  ASSERT_EQ(looked.exit_code, 0) << looked.err;
  EXPECT_EQ(looked.json()["tokens"], plain.json()["tokens"]) << "--lookup 2";
  EXPECT_EQ(looked.json()["spec"]["drafter"], "feature-head");

  for (const int ranks : {0, 2}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    for (const char* tree : {"none", "0.6:3,1:1"}) {
      const CommandResult r =
          run(generate(fmt::format("--spec feature-head --feature-head {} --tree {} --debug-sync",
                                   head.string(), tree)),
              ranks, 240);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const nlohmann::json out = r.json();
      EXPECT_EQ(out["tokens"], plain.json()["tokens"]) << "ranks " << ranks << " tree " << tree;
      EXPECT_EQ(out["spec"]["drafter"], "feature-head");
      EXPECT_EQ(out["spec"]["feature_head"]["file"], head.string());
      EXPECT_GT(out["drafted"].get<int>(), 0);
      EXPECT_GT(out["spec"]["drafter_state"]["rounds"].get<int>(), 0) << out.dump();
      EXPECT_GT(out["spec"]["drafter_state"]["committed_rows"].get<int>(), 0) << out.dump();
    }
  }
}

// The head in bf16 (what a quantized model gets by default) or quantized at load drafts
// losslessly too.
TEST_F(FeatureHeadCli, ABf16OrQuantizedHeadDraftsLosslessly) {
  if (!torch_available()) {
    GTEST_SKIP() << "/usr/bin/python3 has no torch (scripts/setup.sh installs python3-torch)";
  }
  const auto head = train(collect());
  ASSERT_FALSE(HasFailure());
  const CommandResult plain = run(generate(""));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const char* format : {"bf16", "q8_0"}) {
    SCOPED_TRACE(format);
    const CommandResult r = run(generate("--spec feature-head --feature-head " + head.string() +
                                         " --feature-head-dtype " + format));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.json()["tokens"], plain.json()["tokens"]);
    EXPECT_GT(r.json()["drafted"].get<int>(), 0);
  }
}

TEST_F(FeatureHeadCli, AnExitHeadForeignHeadsAndMisplacedOptionsAreRefused) {
  const auto data = collect();
  const std::string exit_head = (data / "init_layer.safetensors").string();
  // An exit head (collect-exit-data's untrained one) is not a feature head.
  const CommandResult r = run(generate("--spec feature-head --feature-head " + exit_head));
  expect_error(r, "metadata format is 'selfspec-exit-head', expected 'selfspec-feature-head'");
  EXPECT_THAT(r.err, ::testing::HasSubstr(exit_head));
  expect_error(
      run(generate("--spec feature-head --feature-head " + (data / "frozen.safetensors").string())),
      "frozen.safetensors");
  // The options without --spec feature-head, and --spec feature-head without its file.
  expect_error(run(generate("--feature-head " + exit_head)),
               "--feature-head and --feature-head-dtype need --spec feature-head");
  expect_error(
      run(generate("--spec early-exit --exit-head " + exit_head + " --feature-head " + exit_head)),
      "--feature-head and --feature-head-dtype need --spec feature-head");
  expect_error(run(generate("--spec layer-skip --skip-uniform 0.3 --feature-head-dtype bf16")),
               "--feature-head and --feature-head-dtype need --spec feature-head");
  expect_error(run(generate("--spec feature-head")), "--feature-head");
  expect_error(
      run(generate("--spec feature-head --feature-head " + exit_head + " --feature-head-dtype q4")),
      "--feature-head-dtype");

  // A trained head for model "m" with another model.
  if (!torch_available()) {
    GTEST_SKIP() << "/usr/bin/python3 has no torch (scripts/setup.sh installs python3-torch): "
                    "the refusal of a head for another model is not checked";
  }
  const auto head = train(data);
  ASSERT_FALSE(HasFailure());
  const auto other = make_model("other", 6);
  expect_error(run(fmt::format("generate --model {} --tokenizer {} --prompt x --max-new-tokens 4 "
                               "--spec feature-head --feature-head {}",
                               other.string(), tokenizer_.string(), head.string())),
               "was made for another model");
}

}  // namespace
}  // namespace selfspec::testing
