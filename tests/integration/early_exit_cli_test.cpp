// EESD end to end as a user runs it, on a tiny made-up model: `collect-exit-data` on calibration
// prompts, `scripts/train_exit_head.py` on that data (skipped when /usr/bin/python3 has no torch),
// then `generate --spec early-exit --exit-head` with the untrained head (init_layer.safetensors)
// and the trained one: the plain output at TP 1 and under mpirun -np 2 with --debug-sync, chains
// and trees. Cali-TS the same way: `collect-cali-data` with the head, `train_exit_head.py
// --predictor`, then `generate --controller cali-ts` (plain output at TP 1 and 2, the same draft
// lengths at both). A head or predictor made for another model or exit layer, or options in the
// wrong combination, are refused naming the file or option.
#include "tests/integration/draft_head_cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace selfspec::testing {
namespace {

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);

class EarlyExitCli : public DraftHeadCli {
 protected:
  // The exit head's data: exit layer N = 2.
  std::filesystem::path collect() { return collect_at(2); }
  // The last step of the tests that call it: without MPI it skips the rest of the test at TP 2.
  void expect_plain_output(const std::filesystem::path& head) {
    const CommandResult plain = run(generate(""));
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    for (const int ranks : {0, 2}) {
      if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
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
};

TEST_F(EarlyExitCli, TheUntrainedHeadDraftsLosslesslyAtTp1AndTp2) {
  const auto data = collect();
  expect_plain_output(data / "init_layer.safetensors");
}

TEST_F(EarlyExitCli, CollectTrainLoadDraft) {
  if (!torch_available()) {
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
// data's hidden states are BF16, the rest is exact enough not to flip an argmax here). The engine
// runs f32 weights here: with bf16 weights it rounds every matmul's input to bf16 (the vdpbf16ps
// kernels), which the f32 trainer does not, and an argmax near a tie could flip.
TEST_F(EarlyExitCli, TheTrainersLayerIsTheEnginesLayer) {
  if (!torch_available()) {
    GTEST_SKIP() << "/usr/bin/python3 has no torch (scripts/setup.sh installs python3-torch)";
  }
  const auto data = dir_ / "data-last";
  const CommandResult collected = run(fmt::format(
      "collect-exit-data --model {} --tokenizer {} --prompts-file {} --exit-layer 3 --top-k 8 "
      "--generate 24 --weights-dtype f32 --out {}",
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

// collect-cali-data's rows follow the recording rule and its output is the plain output.
TEST_F(EarlyExitCli, CollectCaliDataRecordsOneRowPerDraftUpToTheFirstRejection) {
  const auto data = collect();
  const auto cali = dir_ / "cali";
  const CommandResult r = run(
      fmt::format("collect-cali-data --model {} --tokenizer {} --prompts-file {} --exit-head {} "
                  "--generate 24 --max-draft 4 --shard-rows 40 --out {} --json",
                  model_.string(), tokenizer_.string(), suite_.string(),
                  (data / "init_layer.safetensors").string(), cali.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json manifest = nlohmann::json::parse(read_file(cali / "manifest.json"));
  EXPECT_EQ(manifest["format"], "selfspec-cali-data");
  EXPECT_EQ(manifest["exit_layer"], 2);
  EXPECT_EQ(manifest["hidden_size"], 64);
  EXPECT_EQ(manifest["steps"], 10);
  EXPECT_TRUE(manifest["complete"].get<bool>());
  const auto rows = manifest["rows"].get<std::int64_t>();
  const auto rounds = manifest["rounds"].get<std::int64_t>();
  const auto accepted = manifest["accepted_rows"].get<std::int64_t>();
  // Each round drafts K = 4 (fewer only at the budget's end) and records accepted + 1 rows, or 4
  // when all were accepted; every accepted draft is one generated token besides the round's own.
  EXPECT_GT(rounds, 0);
  EXPECT_LE(rows, 4 * rounds);
  EXPECT_GE(rows, rounds);
  EXPECT_EQ(manifest["generated_tokens"].get<std::int64_t>(), 4 * 24);
  EXPECT_LE(accepted + rounds, 4 * 24);
  std::int64_t shard_rows = 0;
  for (const auto& shard : manifest["shards"]) {
    EXPECT_TRUE(std::filesystem::exists(cali / shard["file"].get<std::string>()));
    shard_rows += shard["rows"].get<std::int64_t>();
  }
  EXPECT_EQ(shard_rows, rows);
  EXPECT_GE(manifest["shards"].size(), 2U) << "--shard-rows 40 splits the rows";
  // The evaluation split and an existing collection are refused.
  expect_error(run(fmt::format("collect-cali-data --model {} --tokenizer {} --prompts-file {} "
                               "--exit-head {} --out {}",
                               model_.string(), tokenizer_.string(), suite_.string(),
                               (data / "init_layer.safetensors").string(), cali.string())),
               "manifest.json exists");
  expect_error(
      run(fmt::format("collect-cali-data --model {} --tokenizer {} --prompts-file {} "
                      "--split evaluation --exit-head {} --out {}",
                      model_.string(), tokenizer_.string(), suite_.string(),
                      (data / "init_layer.safetensors").string(), (dir_ / "cali2").string())),
      "calibration prompts only");
}

TEST_F(EarlyExitCli, CaliTsCollectTrainLoadDraft) {
  if (!torch_available()) {
    GTEST_SKIP() << "/usr/bin/python3 has no torch (scripts/setup.sh installs python3-torch)";
  }
  const auto data = collect();
  const auto head = data / "init_layer.safetensors";
  const auto cali = dir_ / "cali";
  const CommandResult collected = run(fmt::format(
      "collect-cali-data --model {} --tokenizer {} --prompts-file {} --exit-head {} "
      "--generate 24 --max-draft 4 --out {}",
      model_.string(), tokenizer_.string(), suite_.string(), head.string(), cali.string()));
  ASSERT_EQ(collected.exit_code, 0) << collected.err;
  const auto predictor = dir_ / "predictor.safetensors";
  const std::string train = fmt::format(
      "OMP_NUM_THREADS=1 timeout 120 /usr/bin/python3 {} --predictor {} --out {} --epochs 3 "
      "--threads 1 --json > {} 2>&1",
      (kSource / "scripts/train_exit_head.py").string(), cali.string(), predictor.string(),
      (dir_ / "train.log").string());
  ASSERT_EQ(std::system(train.c_str()), 0) << read_file(dir_ / "train.log");

  const CommandResult plain = run(generate(""));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  nlohmann::json first;
  for (const int ranks : {0, 2}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const CommandResult r =
        run(generate(fmt::format("--spec early-exit --exit-head {} --controller cali-ts "
                                 "--cali-predictor {} --max-draft 4 --seed 3 --debug-sync",
                                 head.string(), predictor.string())),
            ranks, 240);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json out = r.json();
    EXPECT_EQ(out["tokens"], plain.json()["tokens"]) << "ranks " << ranks;
    EXPECT_EQ(out["spec"]["controller"], "cali-ts");
    EXPECT_GT(out["drafted"].get<int>(), 0);
    EXPECT_GT(out["spec"]["controller_state"]["n"].get<int>(), 0) << out.dump();
    if (ranks == 0) {
      first = out;
    } else {
      // Rank 0 decides from replicated hidden states: the same draft lengths at TP 1 and 2.
      EXPECT_EQ(out["drafted"], first["drafted"]);
      EXPECT_EQ(out["accepted"], first["accepted"]);
    }
  }
}

TEST_F(EarlyExitCli, CaliTsOptionsAndForeignPredictorsAreRefused) {
  const auto data = collect();
  const auto head = (data / "init_layer.safetensors").string();
  expect_error(run(generate("--spec early-exit --exit-head " + head + " --controller cali-ts")),
               "--cali-predictor");
  expect_error(run(generate("--spec early-exit --exit-head " + head + " --cali-sigma-s 0.3")),
               "--cali-sigma-s needs --controller cali-ts");
  expect_error(run(generate("--spec layer-skip --skip-uniform 0.3 --controller cali-ts "
                            "--cali-predictor " +
                            head)),
               "--spec early-exit");
  // An exit head is not a predictor.
  expect_error(run(generate("--spec early-exit --exit-head " + head +
                            " --controller cali-ts --cali-predictor " + head)),
               "metadata format is 'selfspec-exit-head'");
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
  expect_error(run(generate("--spec layer-skip --skip-uniform 0.3 --exit-head-dtype bf16")),
               "--exit-head-dtype");
  expect_error(run(generate("--spec early-exit --exit-head " +
                            (data / "init_layer.safetensors").string() + " --exit-head-dtype q4")),
               "--exit-head-dtype");
}

// The head in bf16 (what a quantized model gets by default) or quantized at load drafts
// losslessly too.
TEST_F(EarlyExitCli, ABf16OrQuantizedHeadDraftsLosslessly) {
  const auto data = collect();
  const CommandResult plain = run(generate(""));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const char* format : {"bf16", "q8_0", "q4_k"}) {
    SCOPED_TRACE(format);
    const CommandResult r =
        run(generate("--spec early-exit --exit-head " + (data / "init_layer.safetensors").string() +
                     " --exit-head-dtype " + format));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.json()["tokens"], plain.json()["tokens"]);
    EXPECT_GT(r.json()["drafted"].get<int>(), 0);
  }
}

}  // namespace
}  // namespace selfspec::testing
