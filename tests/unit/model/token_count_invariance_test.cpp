// Token-count invariance and KV-cache behaviour, bit for bit: a token's logits are the same
// whether it is computed alone (decode), inside a prompt (prefill, any chunking), among drafted
// tokens (verification), after a rollback (truncate), or inside a tree-masked batch.
#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "tests/support/tiny_models.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <map>
#include <numeric>
#include <string>

namespace selfspec::testing {
namespace {

class Invariance : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    TinyModelSpec spec = gqa_tiny_spec(3);
    spec.intermediate = 100;
    spec.vocab = 97;
    spec.attention_bias = true;
    spec.dtype = GetParam();
    model_ = write_and_load_model(spec, dir_.path(), comm_);
  }
  std::vector<float> row(const std::vector<float>& logits, std::size_t r) const {
    const auto v = static_cast<std::size_t>(model_->vocab_local());
    return {logits.begin() + static_cast<std::ptrdiff_t>(r * v),
            logits.begin() + static_cast<std::ptrdiff_t>((r + 1) * v)};
  }

  TempDir dir_;
  LocalComm comm_;
  std::unique_ptr<LlamaModel> model_;
  const std::vector<std::int32_t> tokens_ = {1, 17, 4, 88, 23, 5, 61, 9, 42, 77, 13, 30, 2, 56};
};

TEST_P(Invariance, BatchForwardEqualsOneTokenAtATime) {
  KvCache batch_kv = model_->make_kv_cache(64);
  const std::vector<float> batch = forward_all_rows(*model_, batch_kv, tokens_);
  KvCache single_kv = model_->make_kv_cache(64);
  for (std::size_t t = 0; t < tokens_.size(); ++t) {
    const std::vector<float> single =
        forward_all_rows(*model_, single_kv, std::span(tokens_).subspan(t, 1));
    EXPECT_TRUE(bit_identical(single, row(batch, t))) << "token " << t;
  }
}

TEST_P(Invariance, ChunkedPrefillThenDecodeEqualsWholeBatch) {
  KvCache whole_kv = model_->make_kv_cache(64);
  const std::vector<float> whole = forward_all_rows(*model_, whole_kv, tokens_);
  for (std::size_t chunk : {1u, 3u, 5u, 8u}) {
    KvCache kv = model_->make_kv_cache(64);
    for (std::size_t begin = 0; begin < tokens_.size(); begin += chunk) {
      const std::size_t n = std::min(chunk, tokens_.size() - begin);
      const std::vector<float> part =
          forward_all_rows(*model_, kv, std::span(tokens_).subspan(begin, n));
      for (std::size_t i = 0; i < n; ++i) {
        EXPECT_TRUE(bit_identical(row(part, i), row(whole, begin + i)))
            << "chunk " << chunk << " token " << begin + i;
      }
    }
  }
}

TEST_P(Invariance, TruncateRollsBackExactly) {
  // Run A (10 tokens), roll back to 6, continue with different tokens B: logits and cache must
  // equal a fresh run over A[0:6] + B.
  const std::vector<std::int32_t> a(tokens_.begin(), tokens_.begin() + 10);
  const std::vector<std::int32_t> b = {31, 32, 33, 34};
  KvCache kv = model_->make_kv_cache(64);
  forward_all_rows(*model_, kv, a);
  kv.truncate(6);
  EXPECT_EQ(kv.length(), 6);
  const std::vector<float> continued = forward_all_rows(*model_, kv, b);

  std::vector<std::int32_t> fresh_tokens(a.begin(), a.begin() + 6);
  fresh_tokens.insert(fresh_tokens.end(), b.begin(), b.end());
  KvCache fresh_kv = model_->make_kv_cache(64);
  const std::vector<float> fresh = forward_all_rows(*model_, fresh_kv, fresh_tokens);
  for (std::size_t i = 0; i < b.size(); ++i) {
    EXPECT_TRUE(bit_identical(row(continued, i), row(fresh, 6 + i))) << "token " << i;
  }
  ASSERT_EQ(kv.length(), fresh_kv.length());
  const std::int64_t hd = kv.head_dim();
  for (std::int64_t l = 0; l < kv.num_layers(); ++l) {
    for (std::int64_t h = 0; h < kv.kv_heads(); ++h) {
      const std::size_t offset = static_cast<std::size_t>(h * kv.capacity() * hd);
      const std::size_t bytes = static_cast<std::size_t>(kv.length() * hd) * sizeof(float);
      EXPECT_EQ(std::memcmp(kv.f32_keys(l) + offset, fresh_kv.f32_keys(l) + offset, bytes), 0);
      EXPECT_EQ(std::memcmp(kv.f32_values(l) + offset, fresh_kv.f32_values(l) + offset, bytes), 0);
    }
  }
  EXPECT_THROW(kv.truncate(kv.length() + 1), Error);
}

TEST_P(Invariance, TreeMaskedBatchEqualsEachBranchAlone) {
  // Prefix, then a tree: 0 = root; 1, 2 = children of 0; 3 = child of 1.
  const std::vector<std::int32_t> prefix(tokens_.begin(), tokens_.begin() + 5);
  const std::vector<std::int32_t> tree_tokens = {40, 41, 42, 43};
  const std::vector<std::int32_t> parent = {-1, 0, 0, 1};
  std::vector<std::uint8_t> ancestors(16, 0);
  std::vector<std::int32_t> depth(4, 0);
  for (int t = 0; t < 4; ++t) {
    for (int a = t; a >= 0; a = parent[a]) ancestors[t * 4 + a] = 1;
    depth[t] = parent[t] < 0 ? 0 : depth[parent[t]] + 1;
  }
  std::vector<std::int32_t> positions(4);
  for (int t = 0; t < 4; ++t) positions[t] = 5 + depth[t];
  const AttentionMask mask = AttentionMask::tree(4, ancestors);

  KvCache kv = model_->make_kv_cache(64);
  forward_all_rows(*model_, kv, prefix);
  const std::vector<float> tree =
      forward_all_rows(*model_, kv, tree_tokens, nullptr, &mask, positions);

  for (int t = 0; t < 4; ++t) {
    std::vector<std::int32_t> path;
    for (int a = t; a >= 0; a = parent[a]) path.insert(path.begin(), tree_tokens[a]);
    std::vector<std::int32_t> sequence = prefix;
    sequence.insert(sequence.end(), path.begin(), path.end());
    KvCache path_kv = model_->make_kv_cache(64);
    const std::vector<float> alone = forward_all_rows(*model_, path_kv, sequence);
    EXPECT_TRUE(bit_identical(row(tree, t), row(alone, sequence.size() - 1))) << "node " << t;
  }
}

TEST_P(Invariance, SkipPlanDraftThenFullVerifyEqualsFullRun) {
  // A draft with skipped sublayers writes partial KV; the full verification forward over the same
  // slots must overwrite it so the result equals never having drafted.
  const LayerPlan draft = LayerPlan::skipping(3, std::vector<int>{1}, std::vector<int>{0, 2});
  KvCache kv = model_->make_kv_cache(64);
  forward_all_rows(*model_, kv, std::span(tokens_).subspan(0, 6));
  forward_all_rows(*model_, kv, std::span(tokens_).subspan(6, 3), &draft);
  kv.truncate(6);
  const std::vector<float> verified =
      forward_all_rows(*model_, kv, std::span(tokens_).subspan(6, 4));
  KvCache fresh_kv = model_->make_kv_cache(64);
  const std::vector<float> fresh =
      forward_all_rows(*model_, fresh_kv, std::span(tokens_).subspan(0, 10));
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(bit_identical(row(verified, i), row(fresh, 6 + i))) << "token " << i;
  }
}

TEST_P(Invariance, ObservingChangesNothingAndTheFilterPicksTheNames) {
  // An observer, with or without ForwardArgs::observe_only, sees the intermediates it asks for and
  // leaves the logits bit for bit as a forward without one.
  const std::span<const std::int32_t> prompt(tokens_.data(), 6);
  KvCache kv = model_->make_kv_cache(16);
  const std::vector<float> plain = forward_all_rows(*model_, kv, prompt);
  std::vector<std::int32_t> rows(prompt.size());
  std::iota(rows.begin(), rows.end(), 0);
  std::map<std::string, int> seen;
  std::vector<float> final_norm;
  const ForwardObserver observer = [&](std::string_view name, int, std::span<const float> data,
                                       std::int64_t n) {
    ++seen[std::string(name)];
    EXPECT_EQ(data.size(), static_cast<std::size_t>(n * model_->config().hidden_size)) << name;
    if (name == "final_norm") final_norm.assign(data.begin(), data.end());
  };
  kv.clear();
  const std::vector<float> all =
      forward_rows(*model_, kv, prompt, rows, nullptr, nullptr, {}, &observer);
  EXPECT_TRUE(bit_identical(all, plain));
  EXPECT_EQ(seen, (std::map<std::string, int>{{"embed", 1},
                                              {"attn_out", 3},
                                              {"mlp_out", 3},
                                              {"final_residual", 1},
                                              {"final_norm", 1}}));
  const std::vector<float> every_final_norm = final_norm;

  const std::array<std::string_view, 2> only = {"final_norm", "embed"};
  seen.clear();
  final_norm.clear();
  kv.clear();
  std::vector<float> filtered;
  std::vector<std::int32_t> positions(prompt.size());
  std::iota(positions.begin(), positions.end(), 0);
  ForwardArgs args;
  args.tokens = prompt;
  args.positions = positions;
  args.logit_rows = rows;
  args.observer = &observer;
  args.observe_only = only;
  model_->forward(args, kv, filtered);
  EXPECT_TRUE(bit_identical(filtered, plain));
  EXPECT_EQ(seen, (std::map<std::string, int>{{"embed", 1}, {"final_norm", 1}}));
  EXPECT_TRUE(bit_identical(final_norm, every_final_norm));
}

TEST_P(Invariance, ForwardRejectsBadInputs) {
  KvCache kv = model_->make_kv_cache(4);
  const std::vector<std::int32_t> out_of_vocab = {1, 97};
  EXPECT_THROW(forward_all_rows(*model_, kv, out_of_vocab), Error);
  EXPECT_EQ(kv.length(), 0);
  const std::vector<std::int32_t> too_many = {1, 2, 3, 4, 5};
  EXPECT_THROW(forward_all_rows(*model_, kv, too_many), Error);
  const LayerPlan wrong_plan = LayerPlan::full(2);
  EXPECT_THROW(forward_all_rows(*model_, kv, std::span(tokens_).subspan(0, 1), &wrong_plan), Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Invariance,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& test_info) {
                           return std::string(dtype_name(test_info.param));
                         });

}  // namespace
}  // namespace selfspec::testing
