// The engine's forward against the independent double-precision reference on checkpoints the
// test writes: MHA, GQA, tied/untied embeddings, attention bias, explicit head_dim, llama3 and
// linear RoPE scaling, f32/bf16/f16 storage, conversion at load, sharded checkpoints, and skip
// plans (the engine with sublayers skipped equals the reference with the same sublayers removed).
#include "comm/local_comm.hpp"
#include "decode/decoder.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "tests/support/tiny_models.hpp"

#include <gtest/gtest.h>

namespace selfspec::testing {
namespace {

struct Variant {
  std::string name;
  TinyModelSpec spec;
  std::optional<DType> convert_to;
};
void PrintTo(const Variant& variant, std::ostream* os) {
  *os << variant.name;
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
  TinyModelSpec base;
  v.push_back({"mha_f32", base, std::nullopt});
  TinyModelSpec gqa = gqa_tiny_spec(3);
  v.push_back({"gqa_f32", gqa, std::nullopt});
  TinyModelSpec tied = base;
  tied.tie = true;
  v.push_back({"tied_f32", tied, std::nullopt});
  TinyModelSpec bias = gqa;
  bias.attention_bias = true;
  v.push_back({"llama_attention_bias_qkvo", bias, std::nullopt});
  TinyModelSpec qwen2 = bias;
  qwen2.model_type = "qwen2";
  v.push_back({"qwen2_bias_qkv", qwen2, std::nullopt});
  TinyModelSpec head_dim = base;
  head_dim.head_dim = 16;  // q_dim 64 != hidden 32
  head_dim.kv_heads = 2;
  v.push_back({"explicit_head_dim", head_dim, std::nullopt});
  TinyModelSpec llama3 = gqa;
  llama3.rope_theta = 500000.0;
  llama3.rope_scaling.type = RopeScalingType::kLlama3;
  llama3.rope_scaling.factor = 8.0;
  llama3.rope_scaling.low_freq_factor = 1.0;
  llama3.rope_scaling.high_freq_factor = 4.0;
  llama3.rope_scaling.original_max_position_embeddings = 64;
  v.push_back({"llama3_rope", llama3, std::nullopt});
  TinyModelSpec linear = base;
  linear.rope_scaling.type = RopeScalingType::kLinear;
  linear.rope_scaling.factor = 4.0;
  v.push_back({"linear_rope", linear, std::nullopt});
  TinyModelSpec bf16 = gqa;
  bf16.dtype = DType::kBF16;
  v.push_back({"gqa_bf16", bf16, std::nullopt});
  TinyModelSpec f16 = base;
  f16.dtype = DType::kF16;
  v.push_back({"mha_f16", f16, std::nullopt});
  v.push_back({"bf16_converted_to_f32", bf16, DType::kF32});
  TinyModelSpec sharded = gqa;
  sharded.max_shard_bytes = 20000;
  v.push_back({"sharded_checkpoint", sharded, std::nullopt});
  TinyModelSpec odd = base;
  odd.intermediate = 43;  // not a multiple of any SIMD width
  odd.vocab = 61;
  v.push_back({"odd_sizes", odd, std::nullopt});
  return v;
}

const std::vector<std::int32_t> kTokens = {1, 7, 33, 12, 5, 60, 2, 19, 44, 3, 27, 8, 50, 11};

class ForwardVsReference : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    const Variant& variant = GetParam();
    reference_ = write_tiny_checkpoint(variant.spec, dir_.path());
    // bf16 weights on the CPU multiply bf16-rounded activations.
    reference_.bf16_activations = variant.spec.dtype == DType::kBF16 &&
                                  variant.convert_to.value_or(DType::kBF16) == DType::kBF16;
    model_ = load_model(dir_.path(), comm_, variant.convert_to);
    tokens_.assign(kTokens.begin(), kTokens.end());
    for (auto& t : tokens_) t %= static_cast<std::int32_t>(variant.spec.vocab);
  }
  std::span<const float> row(const std::vector<float>& logits, std::size_t t) const {
    const auto vocab = static_cast<std::size_t>(GetParam().spec.vocab);
    return std::span(logits).subspan(t * vocab, vocab);
  }
  // Every row within 2e-5 (relative to the row's largest logit) of the reference's. With bf16
  // activations (8 significant bits at every matmul input) 1e-2: the oracle rounds the same
  // inputs, but its double-precision values sit on the other side of a rounding boundary now and
  // then (one bf16 step, 2^-8, on an element), which later layers carry on (measured: below
  // 6e-3 after a flip; the positions before it agree within 1e-7, on every ISA).
  void expect_matches(const std::vector<float>& logits,
                      const std::vector<std::vector<double>>& expected) const {
    const double tolerance = reference_.bf16_activations ? 1e-2 : 2e-5;
    for (std::size_t t = 0; t < expected.size(); ++t) {
      EXPECT_LT(relative_max_error(row(logits, t), expected[t]), tolerance) << "position " << t;
    }
  }

  TempDir dir_;
  LocalComm comm_;
  ReferenceWeights reference_;
  std::unique_ptr<LlamaModel> model_;
  std::vector<std::int32_t> tokens_;
};

TEST_P(ForwardVsReference, AllPositionsMatchDoubleReference) {
  KvCache kv = model_->make_kv_cache(32);
  expect_matches(forward_all_rows(*model_, kv, tokens_), reference_forward(reference_, tokens_));
}

TEST_P(ForwardVsReference, TpInvariantReductionMatchesDoubleReferenceAndIsDeterministic) {
  KvCache kv = model_->make_kv_cache(32);
  const std::vector<float> rank_order = forward_all_rows(*model_, kv, tokens_);
  model_->set_reduction_order(ReductionOrder::kTpInvariant);
  ASSERT_EQ(model_->reduction_order(), ReductionOrder::kTpInvariant);
  kv.clear();
  const std::vector<float> logits = forward_all_rows(*model_, kv, tokens_);
  kv.clear();
  EXPECT_TRUE(bit_identical(forward_all_rows(*model_, kv, tokens_), logits));
  expect_matches(logits, reference_forward(reference_, tokens_));
  // Back to the rank-order reduction: the original bits.
  model_->set_reduction_order(ReductionOrder::kRankOrder);
  kv.clear();
  EXPECT_TRUE(bit_identical(forward_all_rows(*model_, kv, tokens_), rank_order));
}

TEST_P(ForwardVsReference, SkipPlanMatchesReferenceWithoutThoseSublayers) {
  const int layers = static_cast<int>(GetParam().spec.layers);
  const std::vector<int> skip_attention = {0};
  const std::vector<int> skip_mlp = {layers - 1};
  const LayerPlan plan = LayerPlan::skipping(layers, skip_attention, skip_mlp);
  const std::vector<std::int32_t> tokens(tokens_.begin(), tokens_.begin() + 8);
  KvCache kv = model_->make_kv_cache(32);
  const std::vector<float> logits = forward_all_rows(*model_, kv, tokens, &plan);
  expect_matches(logits, reference_forward(reference_, tokens, {skip_attention, skip_mlp}));
  const auto full = reference_forward(reference_, tokens);
  double distance_to_full = 0.0;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    distance_to_full = std::max(distance_to_full, relative_max_error(row(logits, t), full[t]));
  }
  EXPECT_GT(distance_to_full, 1e-3) << "skipping sublayers must change the output";
}

INSTANTIATE_TEST_SUITE_P(Variants, ForwardVsReference, ::testing::ValuesIn(variants()),
                         [](const auto& test_info) { return test_info.param.name; });

TEST(Generation, GreedyTokensEqualReferenceGreedy) {
  TempDir dir;
  TinyModelSpec spec = gqa_tiny_spec(3);
  spec.kv_heads = 4;
  spec.scale = 2.0;
  const ReferenceWeights reference = write_tiny_checkpoint(spec, dir.path());
  LocalComm comm;
  auto model = load_model(dir.path(), comm);
  const std::vector<std::int32_t> prompt = {1, 9, 23, 4};
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.ignore_eos = true;
  KvCache kv = model->make_kv_cache(32);
  Decoder decoder(*model, comm);
  const GenerationResult result = decoder.generate(prompt, options, kv);
  EXPECT_EQ(result.tokens, reference_greedy(reference, prompt, 12));
  EXPECT_EQ(kv.length(), static_cast<std::int64_t>(prompt.size()) + 11);
}

TEST(Generation, StopsAtEosUnlessIgnored) {
  TempDir dir;
  TinyModelSpec spec;
  spec.scale = 2.0;
  const ReferenceWeights reference = write_tiny_checkpoint(spec, dir.path());
  LocalComm comm;
  auto model = load_model(dir.path(), comm);
  const std::vector<std::int32_t> prompt = {1, 9, 23, 4};
  const std::vector<std::int32_t> expected = reference_greedy(reference, prompt, 10);
  // Declare the 4th generated token an end-of-sequence id: generation must stop right there.
  GenerationOptions options;
  options.max_new_tokens = 10;
  options.eos_ids = {expected[3]};
  const auto first = std::find(expected.begin(), expected.end(), expected[3]) - expected.begin();
  KvCache kv = model->make_kv_cache(32);
  Decoder decoder(*model, comm);
  GenerationResult result = decoder.generate(prompt, options, kv);
  EXPECT_TRUE(result.stopped_on_eos);
  EXPECT_EQ(result.tokens,
            std::vector<std::int32_t>(expected.begin(), expected.begin() + first + 1));
  options.ignore_eos = true;
  kv.clear();
  result = decoder.generate(prompt, options, kv);
  EXPECT_FALSE(result.stopped_on_eos);
  EXPECT_EQ(result.tokens, expected);
}

}  // namespace
}  // namespace selfspec::testing
