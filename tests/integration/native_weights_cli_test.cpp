// Quantized GGUF weights run as stored (--weights-dtype auto / native), through the binary, on
// models make-model quantizes (no download): for each kernel family (Q4_K, Q6_K: super-blocks a
// TP-2 slice cuts at a 32-column group; Q8_0, Q4_0, Q4_1, Q5_0: blocks of 32)
//  * greedy self-speculative output equals plain decoding at TP 1 and TP 2;
//  * with --reduction tp-invariant, plain decoding gives the same tokens at TP 1 and TP 2;
//  * bench and info report the weights per format, the ISA, and v(gamma);
//  * compare-weights against f32 agrees closely (the kernels read the blocks right);
//  * a block with a non-finite scale is an error naming the tensor, not a crash.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

class NativeWeights : public Cli, public ::testing::WithParamInterface<std::string> {
 protected:
  // hidden 256 (one super-block per row), intermediate 1280 (five: TP 2 gives each rank 640
  // columns of down_proj, 2.5 super-blocks), heads 8 / 2 KV, 3 layers, vocab 512.
  std::filesystem::path make_quantized(const std::string& type) {
    const auto path = dir_ / ("q-" + type);
    const CommandResult r = run(fmt::format(
        "make-model --out {} --layers 3 --hidden 256 --heads 8 --kv-heads 2 --intermediate 1280 "
        "--vocab 512 --seed 5 --gguf --gguf-type {}",
        path.string(), type));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path / "model.gguf";
  }

  std::vector<std::int32_t> tokens(const std::filesystem::path& model, int ranks,
                                   const std::string& extra) {
    const CommandResult r =
        run(fmt::format("generate --model {} --prompt-ids 1,17,4,200,33,9,100 --max-new-tokens 24 "
                        "--ignore-eos --json {}",
                        model.string(), extra),
            ranks);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return {};
    return r.json()["tokens"].get<std::vector<std::int32_t>>();
  }
};

TEST_P(NativeWeights, SpeculativeEqualsPlainAtTp1AndTp2) {
  const auto model = make_quantized(GetParam());
  const std::string spec = "--spec layer-skip --skip-attn 1 --skip-mlp 1 --max-draft 3";
  std::vector<std::vector<std::int32_t>> invariant;
  for (const int ranks : {0, 2}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const std::vector<std::int32_t> plain = tokens(model, ranks, "");
    ASSERT_EQ(plain.size(), 24U);
    EXPECT_EQ(tokens(model, ranks, spec), plain) << "np " << ranks;
    invariant.push_back(tokens(model, ranks, "--reduction tp-invariant"));
    EXPECT_EQ(tokens(model, ranks, "--reduction tp-invariant " + spec), invariant.back())
        << "np " << ranks << ", tp-invariant";
  }
  if (invariant.size() == 2) {
    EXPECT_EQ(invariant[1], invariant[0]);
  }
}

TEST_P(NativeWeights, ComparedWithF32TheKernelsReadTheBlocks) {
  const auto model = make_quantized(GetParam());
  const auto ids = dir_ / "ids.json";
  std::ofstream(ids) << R"({"prompts": [{"name": "a", "prompt_ids": [1, 17, 4, 200],
    "greedy_ids": [33, 9, 100, 5, 61, 7, 300, 2, 45, 8]}]})";
  const CommandResult r = run(
      fmt::format("compare-weights --model {} --ids-json {} --json", model.string(), ids.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  const nlohmann::json& source = j["sources"][0];
  EXPECT_EQ(source["positions"], 10);
  // Only the int8 activations separate the two (the f32 reference is the file's values): the
  // distributions stay close. A misread block would move them by orders of magnitude more.
  EXPECT_LT(source["kl_mean"].get<double>(), 0.01);
  EXPECT_THAT(j["candidate"].get<std::string>(), HasSubstr(GetParam()));
  EXPECT_EQ(j["reference"], "f32");
}

INSTANTIATE_TEST_SUITE_P(Types, NativeWeights,
                         ::testing::Values("q4_k", "q6_k", "q8_0", "q4_0", "q4_1", "q5_0"));

class NativeWeightsCli : public Cli {};

TEST_F(NativeWeightsCli, BenchAndInfoReportFormatsIsaAndVerificationCost) {
  const auto path = dir_ / "q";
  ASSERT_EQ(run(fmt::format("make-model --out {} --layers 3 --hidden 256 --heads 8 --kv-heads 2 "
                            "--intermediate 1280 --vocab 512 --gguf --gguf-type q4_k",
                            path.string()))
                .exit_code,
            0);
  const auto model = path / "model.gguf";
  // Three rounds: v(γ) takes the median over rounds, so one preempted forward (under a loaded
  // ctest -j2) cannot make a v absurd, as it once did with one round (v(3) 0.0013).
  const CommandResult bench =
      run(fmt::format("bench --model {} --prompt-len 16 --gen 8 --reps 1 --verify-cost-rounds 3 "
                      "--verify-cost-max 3 --bandwidth-mb 16 --json",
                      model.string()));
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const nlohmann::json b = bench.json();
  EXPECT_EQ(b["weight_dtype"], "q4_k");
  EXPECT_GT(b["weight_bytes_by_format"]["q4_k"].get<double>(), 0.0);
  EXPECT_THAT(b["isa"].get<std::string>(), ::testing::AnyOf("avx512", "avx2", "scalar"));
  // "usable", or why AMX cannot run here (kernels/cpu/amx_probe.hpp).
  EXPECT_FALSE(b["amx"].get<std::string>().empty());
  ASSERT_EQ(b["verify_cost"]["v"].size(), 4U);
  EXPECT_EQ(b["verify_cost"]["v"][0], 1.0);
  // A measured ratio of two timings: present and positive (its size depends on what else the
  // machine runs; under a loaded ctest -j2 it fell below 0.5 once, so no bound is asserted).
  EXPECT_GT(b["verify_cost"]["v"][3].get<double>(), 0.0);
  EXPECT_GT(b["decode_fraction_of_measured_read_bandwidth"].get<double>(), 0.0);

  const CommandResult info = run(fmt::format("info --model {} --tp 2 --json", model.string()));
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const nlohmann::json i = info.json();
  EXPECT_EQ(i["weight_dtype"], "q4_k");
  // Each rank holds its 32-feature units of the intermediate dimension: 640 of 1280 each.
  EXPECT_EQ(i["ranks"][0]["intermediate"][1], 640);
  EXPECT_GT(i["ranks"][1]["weight_bytes_by_format"]["q4_k"].get<double>(), 0.0);
  EXPECT_GT(i["ranks"][1]["weight_bytes_by_format"]["f32"].get<double>(), 0.0);

  // The same file with the weights converted: bf16 panels, no quantized bytes.
  const CommandResult bf16 = run(fmt::format(
      "generate --model {} --prompt-ids 1,2,3 --max-new-tokens 4 --ignore-eos --weights-dtype bf16 "
      "--json",
      model.string()));
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
}

// A block whose f16 scale is infinite: loading fails with the tensor's name and the block's place.
TEST_F(NativeWeightsCli, ABlockWithANonFiniteScaleIsAnErrorNamingTheTensor) {
  const auto path = dir_ / "bad";
  ASSERT_EQ(run(fmt::format("make-model --out {} --layers 3 --hidden 256 --heads 8 --kv-heads 2 "
                            "--intermediate 1280 --vocab 512 --gguf --gguf-type q8_0",
                            path.string()))
                .exit_code,
            0);
  const auto model = path / "model.gguf";
  // The exporter writes the LM head last and the file ends with its last block (Q8_0 blocks are
  // 34 bytes, the f16 scale first): make that scale +infinity.
  std::fstream file(model, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  file.seekp(size - 34);
  const unsigned char inf[2] = {0x00, 0x7C};
  file.write(reinterpret_cast<const char*>(inf), 2);
  file.close();
  const CommandResult r =
      run(fmt::format("generate --model {} --prompt-ids 1,2 --max-new-tokens 2", model.string()));
  expect_error(r, "non-finite f16 scale");
  EXPECT_THAT(r.err, HasSubstr("lm_head.weight"));
}

}  // namespace
}  // namespace selfspec::testing
