// LlamaModel's fused branch (Backend::fuses_norm, fuses_residual_add: on the GPU the tensor-core
// GEMV's folded RMSNorm and residual add), run on the CPU through ComposedFusionBackend, whose
// fused forms are the CPU backend's plain ops composed (the plain path's bits). A model on it must
// give the plain model's logits and KV cache bit for bit: over a prompt, decode steps, a
// verification batch, a tree, a skip-plan draft and an exit head's side branch, with attention
// biases. Where the backend does not offer the fused forms (past its row limit) the plain path
// runs, and a TP-2 model (its projections all-reduced) fuses only what needs no all-reduce.
#include "comm/local_comm.hpp"
#include "tests/support/composed_fusion_backend.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/thread_comm.hpp"
#include "tests/support/tiny_models.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace selfspec::testing {
namespace {

// With and without attention biases (LLaMA's attention_bias: q, k, v and o; an o bias keeps the
// attention's output projection plain, so the MLP's norm cannot fold).
class FusedOps : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    TinyModelSpec spec = gqa_tiny_spec(3);
    spec.intermediate = 100;
    spec.vocab = 97;
    spec.attention_bias = GetParam();
    plain_ = write_and_load_model(spec, dir_.path(), comm_);
    fused_ = load_model_on(backend_, dir_.path(), comm_);
  }

  static void expect_same_kv(const KvCache& a, const KvCache& b) {
    ASSERT_EQ(a.length(), b.length());
    const std::int64_t hd = a.head_dim();
    for (std::int64_t l = 0; l < a.num_layers(); ++l) {
      for (std::int64_t h = 0; h < a.kv_heads(); ++h) {
        const auto offset = static_cast<std::size_t>(h * a.capacity() * hd);
        const auto bytes = static_cast<std::size_t>(a.length() * hd) * sizeof(float);
        EXPECT_EQ(std::memcmp(a.f32_keys(l) + offset, b.f32_keys(l) + offset, bytes), 0) << l;
        EXPECT_EQ(std::memcmp(a.f32_values(l) + offset, b.f32_values(l) + offset, bytes), 0) << l;
      }
    }
  }

  TempDir dir_;
  LocalComm comm_;
  ComposedFusionBackend backend_{make_cpu_backend(), 8};
  std::unique_ptr<LlamaModel> plain_;
  std::unique_ptr<LlamaModel> fused_;
  const std::vector<std::int32_t> tokens_ = {1, 17, 4, 88, 23, 5, 61, 9, 42, 77, 13, 30, 2, 56};
};

TEST_P(FusedOps, PromptDecodeAndVerificationGiveThePlainBits) {
  KvCache plain_kv = plain_->make_kv_cache(64);
  KvCache fused_kv = fused_->make_kv_cache(64);
  const std::span<const std::int32_t> tokens(tokens_);
  // A 5-token prompt, three decode steps, a 4-token verification, two more steps.
  for (const auto& [begin, n] : {std::pair{0, 5}, std::pair{5, 1}, std::pair{6, 1}, std::pair{7, 1},
                                 std::pair{8, 4}, std::pair{12, 1}, std::pair{13, 1}}) {
    const auto part = tokens.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(n));
    EXPECT_TRUE(bit_identical(forward_all_rows(*fused_, fused_kv, part),
                              forward_all_rows(*plain_, plain_kv, part)))
        << "tokens [" << begin << ", " << begin + n << ")";
  }
  expect_same_kv(fused_kv, plain_kv);
  // Without biases every sublayer took the fused forms: Q|K|V and gate|up with the norm folded
  // in, o and down adding into the residual stream (3 layers, 7 forwards). With them, o's bias
  // leaves o pending, so the MLP's norm and o stay plain: Q|K|V and down fuse.
  const std::int64_t per_layer = GetParam() ? 1 : 2;
  EXPECT_EQ(backend_.fused_norm_calls(), per_layer * 3 * 7);
  EXPECT_EQ(backend_.fused_residual_calls(), per_layer * 3 * 7);
  // RoPE and the cache write in Q|K|V's epilogue wherever no bias comes between them.
  EXPECT_EQ(backend_.fused_rope_kv_calls(), GetParam() ? 0 : 3 * 7);
}

TEST_P(FusedOps, ForwardsPastTheBackendsRowLimitTakeThePlainPath) {
  KvCache plain_kv = plain_->make_kv_cache(64);
  KvCache fused_kv = fused_->make_kv_cache(64);
  EXPECT_TRUE(bit_identical(forward_all_rows(*fused_, fused_kv, tokens_),
                            forward_all_rows(*plain_, plain_kv, tokens_)));
  EXPECT_EQ(backend_.fused_norm_calls(), 0);  // 14 tokens, the backend fuses up to 8
  EXPECT_EQ(backend_.fused_residual_calls(), 0);
  EXPECT_EQ(backend_.fused_rope_kv_calls(), 0);
  expect_same_kv(fused_kv, plain_kv);
}

TEST_P(FusedOps, TreesAndSkipPlansGiveThePlainBits) {
  const std::vector<std::int32_t> prefix(tokens_.begin(), tokens_.begin() + 5);
  const std::vector<std::int32_t> tree_tokens = {40, 41, 42, 43};
  const std::vector<std::uint8_t> ancestors = {1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1};
  const std::vector<std::int32_t> positions = {5, 6, 6, 7};
  const AttentionMask mask = AttentionMask::tree(4, ancestors);
  const LayerPlan draft = LayerPlan::skipping(3, std::vector<int>{1}, std::vector<int>{0, 2});
  std::vector<std::vector<float>> results[2];
  LlamaModel* models[2] = {plain_.get(), fused_.get()};
  for (int m = 0; m < 2; ++m) {
    KvCache kv = models[m]->make_kv_cache(64);
    results[m].push_back(forward_all_rows(*models[m], kv, prefix));
    results[m].push_back(forward_all_rows(*models[m], kv, tree_tokens, nullptr, &mask, positions));
    kv.truncate(5);
    results[m].push_back(
        forward_all_rows(*models[m], kv, std::span(tokens_).subspan(5, 3), &draft));
    kv.truncate(5);
    results[m].push_back(forward_all_rows(*models[m], kv, std::span(tokens_).subspan(5, 4)));
  }
  for (std::size_t i = 0; i < results[0].size(); ++i) {
    EXPECT_TRUE(bit_identical(results[1][i], results[0][i])) << "forward " << i;
  }
  EXPECT_GT(backend_.fused_norm_calls(), 0);
}

TEST_P(FusedOps, AnExitHeadsSideBranchAndEarlyExitGiveThePlainBits) {
  attach_layer_as_exit_head(*plain_, dir_.path(), 1);
  attach_layer_as_exit_head(*fused_, dir_.path(), 1);
  KvCache plain_kv = plain_->make_kv_cache(64);
  KvCache fused_kv = fused_->make_kv_cache(64);
  const std::span<const std::int32_t> prompt(tokens_.data(), 6);
  EXPECT_TRUE(bit_identical(forward_all_rows(*fused_, fused_kv, prompt),
                            forward_all_rows(*plain_, plain_kv, prompt)));
  expect_same_kv(fused_kv, plain_kv);  // the head's layer too (side branch)
  std::vector<float> outputs[2];
  KvCache* caches[2] = {&plain_kv, &fused_kv};
  LlamaModel* models[2] = {plain_.get(), fused_.get()};
  for (int m = 0; m < 2; ++m) {
    const std::vector<std::int32_t> next = {tokens_[6]};
    const std::vector<std::int32_t> positions = {6};
    const std::vector<std::int32_t> rows = {0};
    ForwardArgs args;
    args.tokens = next;
    args.positions = positions;
    args.logit_rows = rows;
    args.draft.early_exit = true;
    models[m]->forward(args, *caches[m], outputs[m]);
  }
  EXPECT_TRUE(bit_identical(outputs[1], outputs[0]));
}

INSTANTIATE_TEST_SUITE_P(Biases, FusedOps, ::testing::Bool(), [](const auto& param_info) {
  return std::string(param_info.param ? "WithAttentionBiases" : "WithoutBiases");
});

TEST(FusedOpsTensorParallel, TwoRanksFuseOnlyTheNormAndGiveThePlainBits) {
  // At TP 2 the o and down projections are all-reduced before the residual add, so they stay
  // plain; the first norm (no delta pending after the embedding) still folds. Every layer's
  // Q|K|V takes the RoPE form: the first on the folded norm, the second on the plain norm's h.
  TinyModelSpec spec = tensor_parallel_tiny_spec(2);
  run_ranks(2, false, [&](ThreadComm& comm) {
    std::unique_ptr<TempDir> dir;
    const std::filesystem::path path = write_tiny_checkpoint_on_root(spec, comm, dir, "fused-tp");
    // A backend per rank (a backend holds its current pass's inputs).
    const std::unique_ptr<Backend> plain_backend = make_cpu_backend();
    ComposedFusionBackend backend(make_cpu_backend(), 8);
    std::unique_ptr<LlamaModel> plain = load_model_on(*plain_backend, path, comm);
    std::unique_ptr<LlamaModel> fused = load_model_on(backend, path, comm);
    const std::vector<std::int32_t> tokens = {3, 9, 27, 81, 5};
    KvCache plain_kv = plain->make_kv_cache(16);
    KvCache fused_kv = fused->make_kv_cache(16);
    EXPECT_TRUE(bit_identical(forward_all_rows(*fused, fused_kv, tokens),
                              forward_all_rows(*plain, plain_kv, tokens)));
    EXPECT_EQ(backend.fused_residual_calls(), 0);
    EXPECT_EQ(backend.fused_norm_calls(), 1);
    EXPECT_EQ(backend.fused_rope_kv_calls(), 2);
  });
}

}  // namespace
}  // namespace selfspec::testing
