// Real trained models against an independent implementation: the GGUF named by
// SELFSPEC_REALMODEL_GGUF (with_model.sh fetches it) and the vectors HF transformers produced from
// the same file in float64 (tests/data/realmodel/<SELFSPEC_REALMODEL_NAME>.json).
//   * in process, TP 1, f32 weights (the file's values exactly): the logits after each prompt
//     agree with the reference's top 5 within a tolerance, and 48 greedy tokens equal the
//     reference's;
//   * through the `selfspec` binary: the same greedy tokens at TP 1 and under mpirun at TP 3
//     (SmolLM2) or TP 2 (Qwen2.5: 2 KV heads; its Q4_K/Q6_K ffn_down splits inside a 256-element
//     block, which the loader handles); self-speculative greedy output with a skip set equal to
//     plain decoding at both.
// Greedy tokens may part from the reference only at a step where its top two logits are within
// kTieMargin (float32 against float64 can pick either); the comparison stops there.
#include "comm/local_comm.hpp"
#include "model/llama_model.hpp"
#include "model_io/gguf_file.hpp"
#include "model_io/gguf_model_config.hpp"
#include "model_io/gguf_tensor_source.hpp"
#include "tests/integration/cli_fixture.hpp"
#include "tests/support/model_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace selfspec::testing {
namespace {

constexpr double kTieMargin = 0.02;
// |ours - reference| <= kLogitAbs + kLogitRel * |reference| for the reference's top-5 logits.
constexpr double kLogitAbs = 2e-3;
constexpr double kLogitRel = 2e-4;

struct RealModel {
  std::string name;
  std::filesystem::path gguf;
  nlohmann::json reference;
  int tp = 1;  // the TP degree the multi-rank checks run at (1: none)
};

const RealModel& real_model() {
  static const RealModel model = [] {
    const char* name = std::getenv("SELFSPEC_REALMODEL_NAME");
    const char* gguf = std::getenv("SELFSPEC_REALMODEL_GGUF");
    if (name == nullptr || gguf == nullptr) {
      ADD_FAILURE() << "run through tests/realmodel/with_model.sh (ctest -L realmodel): "
                       "SELFSPEC_REALMODEL_NAME and SELFSPEC_REALMODEL_GGUF are not set";
      return RealModel{};
    }
    RealModel m;
    m.name = name;
    m.gguf = gguf;
    const auto path =
        std::filesystem::path(SELFSPEC_SOURCE_DIR) / "tests/data/realmodel" / (m.name + ".json");
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << "no reference vectors at " << path;
    if (in.good()) m.reference = nlohmann::json::parse(in);
    m.tp = m.name.starts_with("smollm2") ? 3 : 2;
    return m;
  }();
  return model;
}

std::string join_ids(const std::vector<std::int32_t>& ids) {
  return fmt::format("{}", fmt::join(ids, ","));
}

// Compares greedy tokens with the reference's: equal up to the end, or up to a near-tie step.
// Returns how many tokens were compared.
std::size_t expect_greedy_tokens(const std::vector<std::int32_t>& ours,
                                 const nlohmann::json& prompt, const std::string& what) {
  const auto expected = prompt["greedy_ids"].get<std::vector<std::int32_t>>();
  const auto margins = prompt["step_margins"].get<std::vector<double>>();
  EXPECT_EQ(ours.size(), expected.size()) << what;
  for (std::size_t i = 0; i < std::min(ours.size(), expected.size()); ++i) {
    if (ours[i] == expected[i]) continue;
    EXPECT_LT(margins[i], kTieMargin)
        << what << ": token " << i << " is " << ours[i] << ", transformers has " << expected[i]
        << " with a top-2 margin of " << margins[i];
    return i;
  }
  return expected.size();
}

// --- In process, TP 1 -------------------------------------------------------------------------

class RealModelInProcess : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const RealModel& m = real_model();
    if (m.gguf.empty()) return;
    file_ = std::make_unique<GgufFile>(m.gguf);
    config_ = model_config_from_gguf(*file_);
    const ShardPlan shard = ShardPlan::make(config_, 1, 0);
    const GgufTensorSource source(*file_, config_);
    model_ = std::make_unique<LlamaModel>(
        config_, shard, LlamaWeights::load(source, config_, shard, DType::kF32, cpu_backend()),
        comm_, cpu_backend());
  }
  static void TearDownTestSuite() {
    model_.reset();
    file_.reset();
  }

  static inline LocalComm comm_;
  static inline std::unique_ptr<GgufFile> file_;
  static inline ModelConfig config_;
  static inline std::unique_ptr<LlamaModel> model_;
};

std::int32_t argmax(const std::vector<float>& logits) {
  return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

TEST_F(RealModelInProcess, LogitsAndGreedyTokensMatchTransformers) {
  ASSERT_NE(model_, nullptr);
  const nlohmann::json& prompts = real_model().reference["prompts"];
  ASSERT_GE(prompts.size(), 4U);
  std::size_t fully_equal = 0;
  for (const nlohmann::json& prompt : prompts) {
    const std::string what = real_model().name + " / " + prompt["name"].get<std::string>();
    const auto ids = prompt["prompt_ids"].get<std::vector<std::int32_t>>();
    const std::size_t n_new = prompt["greedy_ids"].size();
    KvCache kv = model_->make_kv_cache(static_cast<std::int64_t>(ids.size() + n_new));
    const std::vector<std::int32_t> last = {static_cast<std::int32_t>(ids.size() - 1)};
    std::vector<float> logits = forward_rows(*model_, kv, ids, last);

    // The logits after the prompt: the reference's top 5 within tolerance.
    const nlohmann::json& top5 = prompt["first_top5"];
    for (std::size_t k = 0; k < top5["ids"].size(); ++k) {
      const auto id = top5["ids"][k].get<std::size_t>();
      const double expected = top5["logits"][k].get<double>();
      EXPECT_NEAR(logits[id], expected, kLogitAbs + kLogitRel * std::abs(expected))
          << what << ": logit of token " << id;
    }

    std::vector<std::int32_t> generated;
    for (std::size_t step = 0; step < n_new; ++step) {
      generated.push_back(argmax(logits));
      const std::vector<std::int32_t> token = {generated.back()};
      const std::vector<std::int32_t> row = {0};
      if (step + 1 < n_new) logits = forward_rows(*model_, kv, token, row);
    }
    if (expect_greedy_tokens(generated, prompt, what) == n_new) ++fully_equal;
  }
  std::printf("%s: %zu of %zu prompts equal transformers for all their greedy tokens (TP 1, f32)\n",
              real_model().name.c_str(), fully_equal, prompts.size());
}

// --- Through the binary ------------------------------------------------------------------------

class RealModelCli : public Cli {
 protected:
  // `selfspec generate` on the prompt's ids: the greedy tokens.
  std::vector<std::int32_t> generate(const nlohmann::json& prompt, int ranks,
                                     const std::string& extra) {
    const auto ids = prompt["prompt_ids"].get<std::vector<std::int32_t>>();
    const CommandResult r = run(
        fmt::format("generate --model {} --prompt-ids {} --max-new-tokens {} --ignore-eos --json "
                    "{}",
                    real_model().gguf.string(), join_ids(ids), prompt["greedy_ids"].size(), extra),
        ranks, 1700);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return {};
    return r.json()["tokens"].get<std::vector<std::int32_t>>();
  }
};

TEST_F(RealModelCli, GreedyTokensMatchTransformersAtEveryTpDegree) {
  ASSERT_FALSE(real_model().gguf.empty());
  const nlohmann::json& prompts = real_model().reference["prompts"];
  std::vector<int> launches = {0};
  if (real_model().tp > 1) launches.push_back(real_model().tp);
  for (const int ranks : launches) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    // Single-process, the in-process test has checked every prompt: two show the binary's path.
    const std::size_t count = ranks == 0 && launches.size() > 1 ? 2 : prompts.size();
    for (std::size_t i = 0; i < count; ++i) {
      const nlohmann::json& prompt = prompts[i];
      const std::string what = fmt::format("{} / {} (np {})", real_model().name,
                                           prompt["name"].get<std::string>(), ranks);
      expect_greedy_tokens(generate(prompt, ranks, "--weights-dtype f32"), prompt, what);
    }
  }
}

// The default weights (a GGUF's quantized tensors run as stored, int8 activations): greedy
// self-speculative output equals plain decoding at every TP degree. Across TP degrees the
// rank-order all-reduce changes the residual stream by rounding, which the int8 activations can
// turn into a different quantization step now and then, so a near-tie may be decided differently at
// another degree; --reduction tp-invariant sums in one fixed order at every degree, and then plain
// decoding gives the same tokens at TP 1 and TP > 1 too.
TEST_F(RealModelCli, SelfSpeculativeGreedyEqualsPlainDecoding) {
  ASSERT_FALSE(real_model().gguf.empty());
  const nlohmann::json& prompt = real_model().reference["prompts"][0];
  // Every other layer's MLP and two attention sublayers skipped: a cheap, poor draft, so both
  // acceptance and rejection paths run.
  const std::string skip = real_model().name.starts_with("smollm2")
                               ? "--skip-attn 5,9 --skip-mlp 3,7,11,15,19,23"
                               : "--skip-attn 5,9 --skip-mlp 3,7,11,15,19";
  std::vector<int> launches = {0};
  if (real_model().tp > 1) launches.push_back(real_model().tp);
  std::vector<std::vector<std::int32_t>> invariant;
  for (const int ranks : launches) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const std::vector<std::int32_t> plain = generate(prompt, ranks, "");
    EXPECT_EQ(generate(prompt, ranks, "--spec layer-skip --max-draft 4 " + skip), plain)
        << "np " << ranks;
    invariant.push_back(generate(prompt, ranks, "--reduction tp-invariant"));
    EXPECT_EQ(
        generate(prompt, ranks, "--reduction tp-invariant --spec layer-skip --max-draft 4 " + skip),
        invariant.back())
        << "np " << ranks << ", tp-invariant";
  }
  for (std::size_t i = 1; i < invariant.size(); ++i) {
    EXPECT_EQ(invariant[i], invariant[0]) << "tp-invariant plain decoding at np " << launches[i];
  }
}

TEST_F(RealModelCli, InfoShowsTheGeometryOfTheFile) {
  ASSERT_FALSE(real_model().gguf.empty());
  const CommandResult r = run(
      fmt::format("info --model {} --tp {} --json", real_model().gguf.string(), real_model().tp));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  const nlohmann::json& hf = real_model().reference["hf_config"];
  ASSERT_FALSE(hf.is_null()) << "the reference records transformers' config";
  EXPECT_EQ(j["architecture"]["layers"], hf["num_hidden_layers"]);
  EXPECT_EQ(j["architecture"]["hidden_size"], hf["hidden_size"]);
  EXPECT_EQ(j["architecture"]["intermediate_size"], hf["intermediate_size"]);
  EXPECT_EQ(j["architecture"]["attention_heads"], hf["num_attention_heads"]);
  EXPECT_EQ(j["architecture"]["kv_heads"], hf["num_key_value_heads"]);
  EXPECT_EQ(j["architecture"]["vocab_size"], hf["vocab_size"]);
  EXPECT_EQ(j["architecture"]["tie_word_embeddings"], hf["tie_word_embeddings"]);
  EXPECT_TRUE(j["tp_valid"]);
}

}  // namespace
}  // namespace selfspec::testing
