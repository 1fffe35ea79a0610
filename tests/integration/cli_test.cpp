// The real `selfspec` binary as a user runs it, single-process and under mpirun: JSON output,
// identical tokens across TP degrees, sharded checkpoints, load-time conversion, and clear errors
// (non-zero exit + a message naming the option, file or tensor) for bad input — never a hang:
// every command runs under `timeout`.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

TEST_F(Cli, GenerateJsonHasTheDocumentedFields) {
  const auto model = make_model("m");
  const CommandResult r = run(
      fmt::format("generate --model {} --prompt-ids 1,5,9 --max-new-tokens 8 --ignore-eos --json",
                  model.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  EXPECT_EQ(j["tokens"].size(), 8u);
  EXPECT_EQ(j["n_prompt"], 3);
  EXPECT_EQ(j["n_generated"], 8);
  EXPECT_EQ(j["tp"], 1);
  EXPECT_TRUE(j["text"].is_string());
  for (const char* key : {"load_s", "prefill_s", "decode_s", "decode_tokens_per_s"}) {
    EXPECT_TRUE(j["timings"].contains(key)) << key;
  }
}

TEST_F(Cli, TokensAreIdenticalAtEveryTpDegree) {
  const auto model = make_model("m");
  const std::string args = fmt::format(
      "generate --model {} --prompt-ids 1,17,4,200,33 --max-new-tokens 24 --ignore-eos --json",
      model.string());
  const CommandResult single = run(args);
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const auto tokens = single.json()["tokens"];
  SELFSPEC_SKIP_WITHOUT_MPI();
  for (int ranks : {1, 2, 4}) {
    const CommandResult r = run(args, ranks);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.json()["tokens"], tokens) << "np " << ranks;
    EXPECT_EQ(r.json()["tp"], ranks);
  }
}

TEST_F(Cli, SeededSamplingIsReproducible) {
  const auto model = make_model("m");
  const auto args = [&](int seed) {
    return fmt::format(
        "generate --model {} --prompt-ids 1,2 --max-new-tokens 16 --ignore-eos --json "
        "--temperature 1.5 --top-k 50 --top-p 0.95 --seed {}",
        model.string(), seed);
  };
  const CommandResult a = run(args(3));
  const CommandResult b = run(args(3));
  const CommandResult c = run(args(4));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.json()["tokens"], b.json()["tokens"]);
  EXPECT_NE(a.json()["tokens"], c.json()["tokens"]);
}

TEST_F(Cli, ShardedCheckpointAndLoadTimeConversionGiveTheSameTokens) {
  const auto plain = make_model("plain");
  const auto sharded = make_model("sharded", "--shard-mb 0.1");
  EXPECT_TRUE(std::filesystem::exists(sharded / "model.safetensors.index.json"));
  const auto args = [](const std::filesystem::path& m, const std::string& extra) {
    return fmt::format(
        "generate --model {} --prompt-ids 1,2,3 --max-new-tokens 12 --ignore-eos "
        "--json {}",
        m.string(), extra);
  };
  const CommandResult a = run(args(plain, ""));
  const CommandResult b = run(args(sharded, ""));
  const CommandResult c = run(args(plain, "--weights-dtype f32"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.json()["tokens"], b.json()["tokens"]);
  // bf16 -> f32 is exact and the kernels reduce in the same order: same tokens.
  EXPECT_EQ(a.json()["tokens"], c.json()["tokens"]);
}

TEST_F(Cli, InfoReportsTpValidityWithReasons) {
  const auto model = make_model("m");
  CommandResult r = run(fmt::format("info --model {} --tp 4 --json", model.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = r.json();
  EXPECT_TRUE(j["tp_valid"]);
  EXPECT_TRUE(j["kv_heads_replicated"]);
  EXPECT_EQ(j["ranks"].size(), 4u);
  EXPECT_GT(j["ranks"][0]["weight_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_TRUE(j["checkpoint"]["valid"]);
  r = run(fmt::format("info --model {} --tp 3 --json", model.string()));
  EXPECT_EQ(r.exit_code, 2);
  j = r.json();
  EXPECT_FALSE(j["tp_valid"]);
  EXPECT_THAT(j["tp_reason"].get<std::string>(), HasSubstr("not divisible by tp = 3"));
}

TEST_F(Cli, BadOptionsAreRejectedByName) {
  const auto model = make_model("m");
  expect_error(run(fmt::format("generate --model {} --prompt-ids 1 --bogus 1", model.string())),
               "--bogus");
  expect_error(run("generate --prompt-ids 1"), "--model");
  expect_error(run(fmt::format("generate --model {}", model.string())), "--prompt");
  expect_error(
      run(fmt::format("generate --model {} --prompt-ids 1 --weights-dtype fp8", model.string())),
      "--weights-dtype");
  expect_error(run(fmt::format("generate --model {} --prompt-ids 1 --top-p 2", model.string())),
               "--top-p");
  expect_error(run("generate --model /nonexistent/dir --prompt-ids 1"), "/nonexistent/dir");
  expect_error(run(fmt::format("generate --model {} --prompt hello", model.string())),
               "needs a tokenizer");
  expect_error(run(fmt::format("generate --model {} --prompt-ids 1,300", model.string())),
               "outside the model's vocabulary");
  expect_error(run("frobnicate"), "frobnicate");
}

TEST_F(Cli, PromptLongerThanTheContextFailsBeforeLoading) {
  const auto model = make_model("m", "--max-position 64");
  const CommandResult r = run(
      fmt::format("generate --model {} --prompt-ids 1,2,3,4 --max-new-tokens 61", model.string()));
  expect_error(r, "longer than the context of 64 tokens");
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("loading weights")));
  SELFSPEC_SKIP_WITHOUT_MPI();
  expect_error(run(fmt::format("generate --model {} --prompt-ids 1,2 --max-new-tokens 8 "
                               "--ctx-size 6",
                               model.string()),
                   2),
               "--ctx-size");
}

TEST_F(Cli, UnshardableTpDegreeEndsEveryRank) {
  SELFSPEC_SKIP_WITHOUT_MPI();
  const auto model = make_model("m");
  const CommandResult r = run(
      fmt::format("generate --model {} --prompt-ids 1 --max-new-tokens 2", model.string()), 3, 60);
  expect_error(r, "num_attention_heads = 8 is not divisible by tp = 3");
}

TEST_F(Cli, BadCheckpointsNameTheFileOrTensor) {
  const auto base = make_model("base");
  const auto copy = [&](const std::string& name) {
    const auto path = dir_ / name;
    std::filesystem::copy(base, path, std::filesystem::copy_options::recursive);
    return path;
  };
  const auto generate = [&](const std::filesystem::path& m) {
    return run(fmt::format("generate --model {} --prompt-ids 1 --max-new-tokens 2", m.string()));
  };

  const auto truncated = copy("truncated");
  std::filesystem::resize_file(truncated / "model.safetensors",
                               std::filesystem::file_size(truncated / "model.safetensors") - 100);
  expect_error(generate(truncated), "model.safetensors");

  const auto garbage = copy("garbage");
  {
    std::ofstream out(garbage / "model.safetensors", std::ios::binary | std::ios::trunc);
    out << "this is not a safetensors file at all";
  }
  expect_error(generate(garbage), "model.safetensors");

  // A copy whose config.json has one value changed.
  const auto copy_with_config = [&](const std::string& name, const std::string& key, int value) {
    const auto path = copy(name);
    nlohmann::json config = nlohmann::json::parse(read_file(path / "config.json"));
    config[key] = value;
    std::ofstream(path / "config.json", std::ios::trunc) << config.dump(2);
    return path;
  };
  // config.json says 4 layers but the checkpoint has 3.
  expect_error(generate(copy_with_config("missing", "num_hidden_layers", 4)),
               "model.layers.3.input_layernorm.weight");
  // config.json's intermediate size disagrees with the tensors.
  const CommandResult r = generate(copy_with_config("shape", "intermediate_size", 104));
  expect_error(r, "has shape");
  EXPECT_THAT(r.err, HasSubstr("mlp.gate_proj.weight"));

  const auto bad_json = copy("bad_json");
  std::ofstream(bad_json / "config.json", std::ios::trunc) << "{\"hidden_size\": 64,";
  expect_error(generate(bad_json), "config.json");

  const auto no_weights = copy("no_weights");
  std::filesystem::remove(no_weights / "model.safetensors");
  expect_error(generate(no_weights), "model.safetensors");
}

TEST_F(Cli, SelfSpeculativeGenerateMatchesAutoregressiveAtEveryTpDegree) {
  const auto model = make_model("m");
  const std::string base = fmt::format(
      "generate --model {} --prompt-ids 1,17,4,200,33 --max-new-tokens 24 --ignore-eos --json",
      model.string());
  const CommandResult ar = run(base);
  ASSERT_EQ(ar.exit_code, 0) << ar.err;
  for (int ranks : {0, 2, 4}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const auto trace = dir_ / fmt::format("trace{}.jsonl", ranks);
    const CommandResult r = run(
        base + fmt::format(" --spec layer-skip --skip-attn 1 --skip-mlp 0,2 --controller thompson "
                           "--max-draft 4 --debug-sync --trace {}",
                           trace.string()),
        ranks);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = r.json();
    EXPECT_EQ(j["tokens"], ar.json()["tokens"]) << "np " << ranks;
    for (const char* key : {"acceptance_rate", "mean_accepted_length", "draft_forwards",
                            "verify_forwards", "phases", "spec"}) {
      EXPECT_TRUE(j.contains(key)) << key;
    }
    for (const char* key : {"draft_s", "verify_s", "control_s", "comm_s"}) {
      EXPECT_TRUE(j["phases"].contains(key)) << key;
    }
    std::ifstream in(trace);
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
      EXPECT_TRUE(nlohmann::json::parse(line).contains("accepted"));
      ++lines;
    }
    EXPECT_EQ(lines, j["verify_forwards"].get<int>()) << "one trace record per round";
  }
}

// --kv-dtype bf16: self-speculative greedy output equals plain decoding over the same bf16 cache,
// alone and sharded over 2 ranks; bench reports the cache's type and half the KV bytes per token;
// plan sizes the cache in either type (bf16 by default, as a GPU run); anything else is refused by
// name.
TEST_F(Cli, Bf16KvCacheRunsLosslessAndIsReportedAndPlanned) {
  const auto model = make_model("m");
  const std::string base = fmt::format(
      "generate --model {} --prompt-ids 1,17,4,200,33 --max-new-tokens 24 --ignore-eos --json "
      "--kv-dtype bf16",
      model.string());
  const CommandResult ar = run(base);
  ASSERT_EQ(ar.exit_code, 0) << ar.err;
  for (int ranks : {0, 2}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const CommandResult r = run(
        base + " --spec layer-skip --skip-attn 1 --skip-mlp 0,2 --max-draft 4 --tree 1:3", ranks);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.json()["tokens"], ar.json()["tokens"]) << "np " << ranks;
  }

  const std::string bench = fmt::format(
      "bench --model {} --prompt-len 8 --gen 12 --prompts 1 --bandwidth-mb 16 --spec layer-skip "
      "--skip-uniform 0.3 --json",
      model.string());
  const CommandResult f32 = run(bench);
  const CommandResult bf16 = run(bench + " --kv-dtype bf16");
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_EQ(f32.json()["kv_dtype"], "f32") << "auto is f32 on the CPU";
  EXPECT_EQ(bf16.json()["kv_dtype"], "bf16");
  const auto kv_bytes = [](const nlohmann::json& j) {
    return j["bytes_per_decode_token"]["rank0_kv_cache"].get<double>();
  };
  EXPECT_DOUBLE_EQ(kv_bytes(bf16.json()) * 2, kv_bytes(f32.json()));
  EXPECT_TRUE(bf16.json()["speculative"][0]["lossless"].get<bool>());

  const std::string plan = fmt::format("plan --model {} --ctx-size 256 --json", model.string());
  const CommandResult planned = run(plan);
  const CommandResult planned_f32 = run(plan + " --kv-dtype f32");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  ASSERT_EQ(planned_f32.exit_code, 0) << planned_f32.err;
  EXPECT_EQ(planned.json()["kv_dtype"], "bf16");
  EXPECT_EQ(planned.json()["ranks"][0]["kv_cache_bytes"].get<std::uint64_t>() * 2,
            planned_f32.json()["ranks"][0]["kv_cache_bytes"].get<std::uint64_t>());

  // info describes the run as the CPU backend would make it: f32 unless told.
  const std::string info = fmt::format("info --model {} --ctx-size 256 --json", model.string());
  const CommandResult described = run(info);
  const CommandResult described_bf16 = run(info + " --kv-dtype bf16");
  ASSERT_EQ(described.exit_code, 0) << described.err;
  ASSERT_EQ(described_bf16.exit_code, 0) << described_bf16.err;
  EXPECT_EQ(described.json()["kv_dtype"], "f32");
  EXPECT_EQ(described_bf16.json()["kv_dtype"], "bf16");
  EXPECT_EQ(described_bf16.json()["ranks"][0]["kv_cache_bytes"].get<std::uint64_t>() * 2,
            described.json()["ranks"][0]["kv_cache_bytes"].get<std::uint64_t>());

  expect_error(
      run(fmt::format("generate --model {} --prompt-ids 1 --kv-dtype f16", model.string())),
      "--kv-dtype");
}

TEST_F(Cli, PlantedRedundancyPresetWritesItsSkipSet) {
  const auto model = dir_ / "planted";
  const CommandResult made = run(fmt::format(
      "make-model --out {} --preset planted-redundancy --layers 6 --hidden 64 --heads 4 "
      "--kv-heads 2 --intermediate 128 --vocab 500 --json",
      model.string()));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_TRUE(std::filesystem::exists(model / "skips.json"));
  EXPECT_TRUE(std::filesystem::exists(model / "planted_redundancy.json"));
  const nlohmann::json info = made.json();
  EXPECT_EQ(info["preset"], "planted-redundancy");
  EXPECT_EQ(info["redundant_attention"].size() + info["redundant_mlp"].size(), 7u)
      << "round(0.6 x 12) planted-weak sublayers";
  const CommandResult r = run(
      fmt::format("generate --model {} --prompt-ids 1,2,3 --max-new-tokens 16 --ignore-eos --json "
                  "--spec layer-skip --skip-config {}",
                  model.string(), (model / "skips.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(r.json()["acceptance_rate"].get<double>(), 0.5)
      << "skipping the planted-weak sublayers should rarely change the argmax";
}

TEST_F(Cli, SpeculativeBenchReportsTheDocumentedFigures) {
  const auto model = make_model("m");
  const CommandResult r = run(fmt::format(
      "bench --model {} --prompt-len 8 --gen 12 --prompts 2 --bandwidth-mb 16 --spec layer-skip "
      "--skip-uniform 0.3 --controller adaptive,thompson --logits gather,local --json",
      model.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  ASSERT_EQ(j["speculative"].size(), 4u) << "2 controllers x 2 logits modes";
  for (const auto& entry : j["speculative"]) {
    for (const char* key : {"speedup", "acceptance_rate", "mean_accepted_length", "cost_ratio_c",
                            "expected_speedup_eq6", "efficiency", "verify_cost_ratio"}) {
      EXPECT_TRUE(entry.contains(key)) << key;
    }
    EXPECT_TRUE(entry["lossless"].get<bool>()) << "greedy speculative tokens differ";
  }
  EXPECT_GT(j["autoregressive"]["decode_tokens_per_s"].get<double>(), 0.0);
  // The CPU backend verifies on the host in both modes (device-side verification is CUDA's).
  EXPECT_EQ(j["verification"], (nlohmann::json{{"local", "host"}, {"gather", "host"}}));
}

TEST_F(Cli, BenchTakesIgnoreEosWithRandomPrompts) {
  // Random prompts always run to --gen; a run config that sets ignore-eos for `generate` (the
  // 70B-geometry smoke config of tp16_two_nodes.sbatch) must serve `bench` too.
  const auto model = make_model("m");
  const CommandResult r = run(
      fmt::format("bench --model {} --prompt-len 8 --gen 6 --bandwidth-mb 16 --ignore-eos --json",
                  model.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["gen"], 6);
}

TEST_F(Cli, BenchReportsAutoregressiveCommunicationPerToken) {
  // The sweep report plots it and `plan --comm-table` predicts it.
  const auto model = make_model("m");
  const std::string args = fmt::format(
      "bench --model {} --prompt-len 8 --gen 12 --bandwidth-mb 16 --spec layer-skip "
      "--skip-uniform 0.3 --json",
      model.string());
  const CommandResult one = run(args);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  // One rank's "collectives" are local copies: timed, but a sliver of the forward.
  const nlohmann::json ar1 = one.json()["autoregressive"];
  EXPECT_NEAR(ar1["comm_ms_per_token"].get<double>(),
              1e3 * ar1["phases_s"]["comm"].get<double>() / ar1["tokens"].get<double>(), 1e-9);
  const auto ms_per_token = [](const nlohmann::json& ar) {
    return 1e3 / ar["decode_tokens_per_s"].get<double>();  // all of decoding, waits included
  };
  EXPECT_LT(ar1["comm_ms_per_token"].get<double>(), 0.2 * ms_per_token(ar1));
  SELFSPEC_SKIP_WITHOUT_MPI();
  const CommandResult two = run(args + " --tp 2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const nlohmann::json ar2 = two.json()["autoregressive"];
  EXPECT_GT(ar2["comm_ms_per_token"].get<double>(), 0.0);
  EXPECT_NEAR(ar2["comm_ms_per_token"].get<double>(),
              1e3 * ar2["phases_s"]["comm"].get<double>() / ar2["tokens"].get<double>(), 1e-9);
  EXPECT_LT(ar2["comm_ms_per_token"].get<double>(), ms_per_token(ar2));
}

TEST_F(Cli, BenchPrintsItsTableOrWithJsonOneJsonObject) {
  const auto model = make_model("m");
  const std::string bench = fmt::format(
      "bench --model {} --prompt-len 4 --gen 4 --reps 1 --bandwidth-mb 16", model.string());
  CommandResult r = run(bench);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("decode reads")) << "the summary table goes to stdout";
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("{"))) << "no JSON without --json";
  r = run(bench + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["reps"], 1);
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("decode reads")));
  EXPECT_THAT(r.err, HasSubstr("decode reads")) << "with --json the table goes to stderr";
}

TEST_F(Cli, MaxDraftHasOneRangeInEveryCommand) {
  const auto model = make_model("m");
  expect_error(run(fmt::format("plan --model {} --max-draft 0", model.string())), "--max-draft");
  expect_error(run(fmt::format("plan --model {} --max-draft 64", model.string())), "--max-draft");
  EXPECT_EQ(run(fmt::format("plan --model {} --max-draft 63", model.string())).exit_code, 0);
  expect_error(run(fmt::format("generate --model {} --prompt-ids 1 --spec layer-skip "
                               "--skip-attn 1 --max-draft 64",
                               model.string())),
               "--max-draft");
}

TEST_F(Cli, BadSpeculativeOptionsAreRejectedByName) {
  const auto model = make_model("m");
  const std::string base =
      fmt::format("generate --model {} --prompt-ids 1 --max-new-tokens 4 ", model.string());
  expect_error(run(base + "--spec layer-skip"), "exactly one skip set");
  expect_error(run(base + "--spec layer-skip --skip-attn 1 --skip-uniform 0.3"),
               "exactly one skip set");
  expect_error(run(base + "--skip-attn 1"), "--spec layer-skip");
  expect_error(run(base + "--spec layer-skip --skip-attn 1,9"), "9");
  expect_error(run(base + "--spec layer-skip --skip-attn 1,x"), "--skip-attn");
  expect_error(run(base + "--spec layer-skip --skip-uniform 1.5"), "--skip-uniform");
  expect_error(run(base + "--spec layer-skip --skip-attn 1 --controller oracle"), "--controller");
  expect_error(run(base + "--spec layer-skip --skip-attn 1 --max-draft 0"), "--max-draft");
  expect_error(run(base + "--spec layer-skip --skip-config /nonexistent.yaml"),
               "/nonexistent.yaml");
  const auto bad = dir_ / "bad.yaml";
  std::ofstream(bad) << "attention: [1, 2]\nmlpp: [3]\n";
  expect_error(run(base + "--spec layer-skip --skip-config " + bad.string()), "mlpp");
  // --trace is generate's (one run): bench refuses it instead of ignoring it.
  expect_error(run(fmt::format("bench --model {} --prompt-len 4 --gen 4 --spec layer-skip "
                               "--skip-attn 1 --trace {}",
                               model.string(), (dir_ / "trace.jsonl").string())),
               "--trace");
}

}  // namespace
}  // namespace selfspec::testing
