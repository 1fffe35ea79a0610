// Launching from configs, with the real binary: `selfspec plan` on the shipped architecture files
// (LLaMA-2-70B at TP 8 ≈ 17.2 GB of bf16 weights per rank, LLaMA-3-70B at TP 16 by KV-head
// replication, refusals with reasons and exit codes), run configs with command-line overrides,
// synthetic weights identical to the checkpoint make-model writes, the start-up checks that
// reject a bad launch before any weight is read, and `plan --comm-table` (decode latency from a
// comm table).
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);
std::string model_file(const std::string& name) {
  return (kSource / "configs/models" / (name + ".yaml")).string();
}
std::string run_file(const std::string& name) {
  return (kSource / "configs/runs" / (name + ".yaml")).string();
}

class Launch : public Cli {};

TEST_F(Launch, PlanSizesLlama2_70bAtTp8FromTheArchitectureFileAlone) {
  const CommandResult r =
      run(fmt::format("plan --architecture {} --tp 8 --weights-dtype bf16 --gpu-memory 80 --json",
                      model_file("llama-2-70b")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  EXPECT_TRUE(j["tp_valid"]);
  EXPECT_TRUE(j["fits"]);
  EXPECT_EQ(j["weight_dtype"], "bf16");
  ASSERT_EQ(j["ranks"].size(), 8u);
  for (const auto& rank : j["ranks"]) {
    EXPECT_NEAR(rank["weight_bytes"].get<double>() / 1e9, 17.2, 0.1);
    EXPECT_GT(rank["kv_cache_bytes"].get<double>(), 0.0);
    EXPECT_GT(rank["workspace_bytes"].get<double>(), 0.0);
  }
  EXPECT_NEAR(j["weights_total_bytes"].get<double>() / 1e9, 138.0, 0.5);
}

TEST_F(Launch, PlanHandlesLlama3_70bAtTp16AndRefusesWhatCannotBeSplitOrFit) {
  CommandResult r =
      run(fmt::format("plan --architecture {} --tp 16 --json", model_file("llama-3-70b")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.json()["kv_heads_replicated"]);
  EXPECT_EQ(r.json()["nodes"], 2);

  r = run(fmt::format("plan --architecture {} --tp 16 --json", model_file("llama-2-13b")));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(r.json()["tp_valid"]);
  EXPECT_THAT(r.json()["tp_reason"].get<std::string>(), HasSubstr("num_attention_heads = 40"));

  r = run(fmt::format("plan --architecture {} --tp 2 --gpu-memory 40", model_file("llama-2-70b")));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("DOES NOT FIT"));
}

TEST_F(Launch, PlanReadsRunConfigsAndTheCommandLineOverridesThem) {
  CommandResult r =
      run(fmt::format("plan --config {} --json", run_file("llama-2-70b-tp8-draft-verify")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["tp"], 8);
  EXPECT_EQ(r.json()["context"], 4096);
  r = run(fmt::format("plan --config {} --tp 4 --ctx-size 1024 --json",
                      run_file("llama-2-70b-tp8-draft-verify")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["tp"], 4);
  EXPECT_EQ(r.json()["context"], 1024);
  // Every shipped run config plans; the best-* and untrained-* configs name the files
  // scripts/build-best-draft.sh makes (out/best/, git-ignored), and plan only where those exist.
  for (const auto& entry : std::filesystem::directory_iterator(kSource / "configs/runs")) {
    const std::string name = entry.path().stem().string();
    const std::size_t dash = name.find('-');
    const std::string prefix = name.substr(0, dash);
    if ((prefix == "best" || prefix == "untrained") &&
        !std::filesystem::exists(kSource / "out/best" / name.substr(dash + 1) / "model.gguf")) {
      continue;
    }
    r = run(fmt::format("plan --config {} --json", entry.path().string()));
    EXPECT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.err;
    // Where its files exist, a model config also generates: every file it names is found from
    // any directory (plan reads no drafter setting).
    if (prefix == "best" || prefix == "untrained") {
      r = run(fmt::format("generate --config {} --prompt \"def f(x):\" --max-new-tokens 4 --json",
                          entry.path().string()));
      EXPECT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.err;
    }
  }
}

std::string comm_file(const std::string& name) {
  return (kSource / "configs/comm" / (name + ".yaml")).string();
}

// `plan --comm-table`: the per-token decode latency of LLaMA-2-70B at TP 8 over NVLink, priced
// from the shipped table; the JSON's numbers obey the model's formulas
// (launch/plan/comm_cost_model.hpp).
TEST_F(Launch, PlanPredictsDecodeLatencyFromACommTable) {
  const std::string args = fmt::format("plan --architecture {} --tp 8 --comm-table {}",
                                       model_file("llama-2-70b"), comm_file("nvlink-h100-8gpu"));
  CommandResult r = run(args + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json cost = r.json()["cost_model"];
  EXPECT_EQ(cost["table_ranks"], 8);
  EXPECT_EQ(cost["memory_bandwidth_bytes_per_s"].get<double>(), 3.35e12);
  EXPECT_EQ(cost["alpha"].get<double>(), 0.8);
  EXPECT_EQ(cost["draft_len"], 4);
  const nlohmann::json& plain = cost["forwards"]["plain"];
  // 1 (embedding) + 2 x 80 sublayers, one token of hidden 8192 in f32.
  EXPECT_EQ(plain["collectives"][0]["op"], "all_reduce");
  EXPECT_EQ(plain["collectives"][0]["count"], 161);
  EXPECT_EQ(plain["collectives"][0]["bytes"], 8192 * 4);
  EXPECT_NEAR(plain["weight_s"].get<double>(), plain["weight_bytes"].get<double>() / 3.35e12,
              1e-12);
  EXPECT_NEAR(plain["weight_bytes"].get<double>() / 1e9, 17.2, 0.1);
  const nlohmann::json& verify = cost["forwards"]["verify"];
  EXPECT_EQ(verify["tokens"], 5);
  EXPECT_EQ(verify["collectives"][0]["bytes"], 5 * 8192 * 4);
  const nlohmann::json& draft = cost["forwards"]["draft"];
  EXPECT_EQ(draft["collectives"][0]["count"], 81);  // half of the 160 sublayers skipped
  EXPECT_EQ(cost["draft"]["skipped_attention"].get<int>() + cost["draft"]["skipped_mlp"].get<int>(),
            80);
  const double e = (1 - std::pow(0.8, 5)) / (1 - 0.8);
  EXPECT_NEAR(cost["expected_tokens_per_round"].get<double>(), e, 1e-12);
  const double t_plain = cost["per_token_s"]["plain"].get<double>();
  const double t_spec = cost["per_token_s"]["self_speculative"].get<double>();
  EXPECT_NEAR(t_plain, plain["total_s"].get<double>(), 1e-15);
  EXPECT_NEAR(t_spec, (4 * draft["total_s"].get<double>() + verify["total_s"].get<double>()) / e,
              1e-12);
  EXPECT_NEAR(cost["speedup"].get<double>(), t_plain / t_spec, 1e-9);
  EXPECT_GT(t_plain, 5e-3);  // ≥ 17.2 GB / 3.35 TB/s
  EXPECT_LT(t_plain, 20e-3);

  r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("161 x all_reduce 32.0 KiB"));
  EXPECT_THAT(r.out, HasSubstr("predicted speedup"));
  // Without the option, plan says nothing of it.
  r = run(fmt::format("plan --architecture {} --tp 8", model_file("llama-2-70b")));
  EXPECT_THAT(r.out, Not(HasSubstr("cost model")));
  r = run(fmt::format("plan --architecture {} --tp 8 --json", model_file("llama-2-70b")));
  EXPECT_FALSE(r.json().contains("cost_model"));
}

TEST_F(Launch, PlanCostModelTakesTheRunConfigsSkipSetTwoNodesAndOverrides) {
  CommandResult r =
      run(fmt::format("plan --config {} --comm-table {} --json",
                      run_file("llama-2-70b-tp8-draft-verify"), comm_file("nvlink-h100-8gpu")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json cost = r.json()["cost_model"];
  EXPECT_THAT(cost["draft"]["from"].get<std::string>(), HasSubstr("llama-2-70b"));
  EXPECT_EQ(cost["draft"]["skipped_attention"], 47);  // configs/skips/llama-2-70b.yaml
  EXPECT_EQ(cost["draft"]["skipped_mlp"], 37);
  // --skip-fraction wins over the run config's set.
  r =
      run(fmt::format("plan --config {} --comm-table {} --skip-fraction 0.25 --alpha 0.9 "
                      "--draft-len 6 --logits gather --memory-bandwidth 2000 --json",
                      run_file("llama-2-70b-tp8-draft-verify"), comm_file("nvlink-h100-8gpu")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  cost = r.json()["cost_model"];
  EXPECT_EQ(cost["draft"]["skipped_attention"].get<int>() + cost["draft"]["skipped_mlp"].get<int>(),
            40);
  EXPECT_EQ(cost["forwards"]["verify"]["tokens"], 7);
  EXPECT_EQ(cost["memory_bandwidth_from"], "--memory-bandwidth");
  EXPECT_EQ(cost["forwards"]["plain"]["collectives"][1]["bytes"], 4000 * 4);  // a logits row
  // TP 16 over two nodes.
  r = run(fmt::format("plan --architecture {} --tp 16 --comm-table {} --json",
                      model_file("llama-3-70b"), comm_file("infiniband-ndr-2node")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["cost_model"]["table_nodes"], 2);
  EXPECT_GT(r.json()["cost_model"]["comm_fraction"]["plain"].get<double>(), 0.0);
}

TEST_F(Launch, PlanCostModelErrors) {
  const auto table = dir_ / "no-memory.yaml";
  std::ofstream(table) << "ops:\n  all_reduce: {fit: {latency_s: 1.0e-5}}\n";
  const std::string args = fmt::format("plan --architecture {} --tp 8 --comm-table {}",
                                       model_file("llama-2-70b"), table.string());
  expect_error(run(args), "--memory-bandwidth");
  EXPECT_EQ(run(args + " --memory-bandwidth 1000").exit_code, 0);
  const auto bad = dir_ / "bad.yaml";
  std::ofstream(bad) << "ops:\n  all_reduce: {points: [{bytes: 8, median_s: -1}]}\n";
  expect_error(run(fmt::format("plan --architecture {} --tp 8 --comm-table {}",
                               model_file("llama-2-70b"), bad.string())),
               "ops.all_reduce.points[0].median_s");
  // A split that cannot be made keeps its exit status; there is nothing to price.
  const CommandResult r =
      run(fmt::format("plan --architecture {} --tp 16 --comm-table {} --json",
                      model_file("llama-2-13b"), comm_file("nvlink-h100-8gpu")));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.json()["cost_model"].is_null());
}

TEST_F(Launch, SyntheticWeightsGiveTheTokensOfTheCheckpointWithTheSameSeed) {
  const auto model = dir_ / "m";
  ASSERT_EQ(run(fmt::format("make-model --out {} --layers 3 --hidden 64 --heads 8 --kv-heads 2 "
                            "--intermediate 100 --vocab 300 --seed 5",
                            model.string()))
                .exit_code,
            0);
  const std::string generate =
      "generate --prompt-ids 1,17,4 --max-new-tokens 12 --ignore-eos --json";
  const CommandResult from_checkpoint = run(fmt::format("{} --model {}", generate, model.string()));
  ASSERT_EQ(from_checkpoint.exit_code, 0) << from_checkpoint.err;
  const CommandResult from_architecture = run(fmt::format(
      "{} --architecture {} --synthetic-seed 5", generate, (model / "config.json").string()));
  ASSERT_EQ(from_architecture.exit_code, 0) << from_architecture.err;
  const CommandResult synthetic_in_place = run(fmt::format(
      "{} --model {} --synthetic-weights --synthetic-seed 5", generate, model.string()));
  ASSERT_EQ(synthetic_in_place.exit_code, 0) << synthetic_in_place.err;
  EXPECT_EQ(from_architecture.json()["tokens"], from_checkpoint.json()["tokens"]);
  EXPECT_EQ(synthetic_in_place.json()["tokens"], from_checkpoint.json()["tokens"]);
  // Another seed is another model.
  const CommandResult other = run(fmt::format("{} --architecture {} --synthetic-seed 6", generate,
                                              (model / "config.json").string()));
  EXPECT_NE(other.json()["tokens"], from_checkpoint.json()["tokens"]);
  // And the layer override applies to synthetic weights only.
  expect_error(run(fmt::format("{} --model {} --layers 2", generate, model.string())),
               "--layers 2 needs synthetic weights");
}

// --weights-dtype q4_k with synthetic weights: the matrices stored in Q4_K (random blocks) and run
// as stored; `plan` and `info` count them in Q4_K; a checkpoint keeps its own formats.
TEST_F(Launch, SyntheticWeightsStoredQuantizedRunAsStored) {
  const auto model = dir_ / "q";
  ASSERT_EQ(run(fmt::format("make-model --out {} --layers 2 --hidden 256 --heads 4 --kv-heads 2 "
                            "--intermediate 512 --vocab 300 --seed 5",
                            model.string()))
                .exit_code,
            0);
  const std::string architecture = (model / "config.json").string();
  CommandResult r = run(fmt::format(
      "generate --architecture {} --weights-dtype q4_k --prompt-ids 1,17,4 --max-new-tokens 6 "
      "--ignore-eos --json",
      architecture));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["n_generated"], 6);
  r = run(fmt::format("plan --architecture {} --weights-dtype q4_k --json", architecture));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("q4_k"));
  expect_error(run(fmt::format("generate --model {} --weights-dtype q4_k --prompt-ids 1 "
                               "--max-new-tokens 2",
                               model.string())),
               "a quantized format is for synthetic weights");
}

TEST_F(Launch, RunConfigsFeedGenerateAndBadKeysAreNamed) {
  const auto model = make_model("m");
  const auto config = dir_ / "run.yaml";
  std::ofstream(config) << fmt::format(
      "model: {}\ndecoding:\n  spec: layer-skip\n  skip-attn: [1]\n  max-draft: 3\n"
      "max_new_tokens: 9\nignore-eos: true\nprompt-ids: [1, 2, 3]\ngpu-memory: 80\n",
      model.string());
  CommandResult r = run(fmt::format("generate --config {} --json", config.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["n_generated"], 9);
  EXPECT_EQ(r.json()["spec"]["max_draft"], 3);
  r = run(fmt::format("generate --config {} --max-new-tokens 4 --json", config.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["n_generated"], 4);

  std::ofstream(config) << "max-new-tokns: 9\n";
  r = run(fmt::format("generate --config {} --model {} --prompt-ids 1", config.string(),
                      model.string()));
  expect_error(r, "unknown key 'max-new-tokns'");
  EXPECT_THAT(r.err, HasSubstr(config.string()));
}

const std::string kSeventy = fmt::format(
    "generate --architecture {} --layers 2 --prompt-ids 1,2 --max-new-tokens 2 --threads 1",
    model_file("llama-2-70b"));

TEST_F(Launch, BadLaunchesAreRejectedBeforeAnyWeightIsRead) {
  // Both a checkpoint and an architecture.
  const auto model = make_model("m");
  expect_error(run(fmt::format("{} --model {}", kSeventy, model.string())), "give one of them");
  // SLURM started 4 tasks but this process is alone: the silent singleton start (with MPI), or
  // four copies of a build that has no MPI.
  const CommandResult r =
      run_in_environment("SLURM_JOB_ID=42 SLURM_NTASKS=4 SLURM_STEP_NUM_TASKS=4", kSeventy, 60);
  expect_error(r, "SLURM_STEP_NUM_TASKS=4");
  EXPECT_THAT(r.err, HasSubstr(SELFSPEC_HAVE_MPI ? "srun --mpi=pmix" : "built without MPI"));
  EXPECT_THAT(r.err, Not(HasSubstr("loading weights")));
}

TEST_F(Launch, BadMultiRankLaunchesAreRejectedBeforeAnyWeightIsRead) {
  SELFSPEC_SKIP_WITHOUT_MPI();
  // 64 heads do not split 3 ways.
  CommandResult r = run(kSeventy, 3);
  expect_error(r, "num_attention_heads = 64 is not divisible by tp = 3");
  EXPECT_THAT(r.err, Not(HasSubstr("loading weights")));
  // The config says TP 8; the job has 2 ranks.
  r = run(kSeventy + " --tp 8", 2);
  expect_error(r, "--tp 8 but the job has 2 rank(s)");
  EXPECT_THAT(r.err, Not(HasSubstr("loading weights")));
}

TEST_F(Launch, VersionNamesTheBuildsFlavour) {
  const CommandResult r = run("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("selfspec "));
  EXPECT_THAT(r.out, HasSubstr(SELFSPEC_HAVE_MPI ? "MPI yes" : "MPI no: single rank"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("CPU kernels (avx512|avx2|scalar)\\)"));
  // A lower rung on request; a bad value is named, not fatal to --version.
  setenv("SELFSPEC_CPU_ISA", "scalar", 1);
  const CommandResult scalar = run("--version");
  unsetenv("SELFSPEC_CPU_ISA");
  EXPECT_THAT(scalar.out, HasSubstr("CPU kernels scalar)"));
}

// A build without MPI runs one rank: it refuses --tp 2 and a launch as one of several tasks (each
// task would run the whole job alone), naming the cause, before any weight is read; --tp 1 and a
// launcher's single task run. (launch_test checks the messages in both flavours.)
TEST_F(Launch, WithoutMpiTpAboveOneAndSeveralTasksAreRefused) {
  if (SELFSPEC_HAVE_MPI) {
    GTEST_SKIP() << "checks the build without MPI (SELFSPEC_MPI=OFF); this one has MPI";
  }
  const auto model = make_model("m");
  const std::string generate =
      fmt::format("generate --model {} --prompt-ids 1,2 --max-new-tokens 2 --json", model.string());
  CommandResult r = run(generate + " --tp 2");
  expect_error(r, "--tp 2: this selfspec was built without MPI");
  EXPECT_THAT(r.err, HasSubstr("--tp 1"));
  EXPECT_THAT(r.err, Not(HasSubstr("loading weights")));
  r = run(generate + " --tp 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* launcher :
       {"OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1", "PMI_SIZE=3 PMI_RANK=0",
        "SLURM_JOB_ID=42 SLURM_NTASKS=4 SLURM_STEP_NUM_TASKS=4 PMIX_RANK=2"}) {
    r = run_in_environment(launcher, generate);
    expect_error(r, "built without MPI");
    EXPECT_THAT(r.err, HasSubstr("launched as one of"));
    EXPECT_THAT(r.err, Not(HasSubstr("loading weights")));
  }
  // mpirun -np 1 (or srun -n 1) around this build is a single-rank job.
  r = run_in_environment("OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0", generate);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("comm local (this build has no MPI)"));
}

}  // namespace
}  // namespace selfspec::testing
