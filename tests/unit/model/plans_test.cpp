// Shard plans (Megatron split, KV replication, uneven intermediate/vocab, refusals with reasons),
// layer plans (skips, wire mask round trip) and the KV cache's bookkeeping.
#include "core/error.hpp"
#include "model/kv_cache.hpp"
#include "model/layer_plan.hpp"
#include "model/shard_plan.hpp"
#include "model_io/synthetic_model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace selfspec {
namespace {

using ::testing::HasSubstr;

ModelConfig config_with(std::int64_t heads, std::int64_t kv_heads, std::int64_t intermediate,
                        std::int64_t vocab) {
  return make_synthetic_config(2, heads * 8, heads, kv_heads, intermediate, vocab);
}

TEST(ShardPlan, SplitsHeadsIntermediateAndVocabEvenly) {
  const ModelConfig c = config_with(32, 8, 11008, 32000);
  for (int rank = 0; rank < 4; ++rank) {
    const ShardPlan p = ShardPlan::make(c, 4, rank);
    EXPECT_EQ(p.q_heads.begin, 8 * rank);
    EXPECT_EQ(p.q_heads.size(), 8);
    EXPECT_EQ(p.kv_heads.begin, 2 * rank);
    EXPECT_EQ(p.kv_heads.size(), 2);
    EXPECT_FALSE(p.kv_replicated);
    EXPECT_EQ(p.intermediate.size(), 2752);
    EXPECT_EQ(p.vocab.size(), 8000);
  }
}

TEST(ShardPlan, ReplicatesKvHeadsWhenTpExceedsThem) {
  // stories260K geometry: 8 query heads, 4 KV heads, intermediate 172 at tp = 8.
  const ModelConfig c = config_with(8, 4, 172, 512);
  std::int64_t intermediate_total = 0;
  for (int rank = 0; rank < 8; ++rank) {
    const ShardPlan p = ShardPlan::make(c, 8, rank);
    EXPECT_TRUE(p.kv_replicated);
    EXPECT_EQ(p.q_heads.size(), 1);
    EXPECT_EQ(p.kv_heads.begin, rank / 2) << "query head " << rank << " uses KV head " << rank / 2;
    EXPECT_EQ(p.kv_heads.size(), 1);
    EXPECT_GE(p.intermediate.size(), 21);
    EXPECT_LE(p.intermediate.size(), 22);
    intermediate_total += p.intermediate.size();
  }
  EXPECT_EQ(intermediate_total, 172);
}

TEST(ShardPlan, RefusesWithTheReason) {
  EXPECT_THAT(*ShardPlan::check(config_with(8, 4, 172, 512), 3),
              HasSubstr("num_attention_heads = 8 is not divisible by tp = 3"));
  EXPECT_THAT(*ShardPlan::check(config_with(12, 6, 64, 512), 4),
              HasSubstr("num_key_value_heads = 6"));
  EXPECT_THAT(*ShardPlan::check(config_with(8, 8, 4, 512), 8), HasSubstr("intermediate_size"));
  EXPECT_FALSE(ShardPlan::check(config_with(64, 8, 28672, 128256), 8).has_value());
  EXPECT_FALSE(ShardPlan::check(config_with(64, 8, 28672, 128256), 16).has_value());
  try {
    ShardPlan::make(config_with(8, 4, 172, 512), 3, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot shard the model over 3 tensor-parallel ranks"));
  }
}

TEST(LayerPlan, SkipsAndMaskRoundTrip) {
  const std::vector<int> attention = {0, 5, 63, 64, 79};
  const std::vector<int> mlp = {2, 70};
  const LayerPlan plan = LayerPlan::skipping(80, attention, mlp);
  EXPECT_EQ(plan.skipped_count(), 7);
  EXPECT_FALSE(plan.runs_attention(64));
  EXPECT_TRUE(plan.runs_mlp(64));
  EXPECT_EQ(plan.skipped_attention(), attention);
  EXPECT_EQ(plan.skipped_mlp(), mlp);
  std::array<std::uint64_t, LayerPlan::kMaskWords> mask{};
  plan.to_mask(mask);
  EXPECT_EQ(LayerPlan::from_mask(80, mask), plan);
  EXPECT_EQ(plan.describe(), "attn[0,5,63,64,79] mlp[2,70]");
  EXPECT_TRUE(LayerPlan::full(4).is_full());
  EXPECT_THROW(LayerPlan::skipping(4, std::vector<int>{4}, {}), Error);
  EXPECT_THROW(LayerPlan::skipping(4, {}, std::vector<int>{-1}), Error);
}

TEST(KvCache, LengthBookkeeping) {
  const std::unique_ptr<Backend> backend = make_cpu_backend();
  KvCache kv(*backend, 2, 3, 8, 10);
  EXPECT_EQ(kv.bytes(), 2u * 2 * 3 * 10 * 8 * sizeof(float));
  EXPECT_EQ(kv.bytes(), KvCache::bytes_for(2, 3, 8, 10));
  kv.extend(7);
  EXPECT_EQ(kv.length(), 7);
  EXPECT_THROW(kv.extend(4), Error);
  kv.truncate(3);
  EXPECT_EQ(kv.length(), 3);
  EXPECT_THROW(kv.truncate(4), Error);
  EXPECT_NE(kv.f32_keys(1), kv.f32_values(1));
  EXPECT_EQ(kv.f32_values(0) + 3 * 10 * 8, kv.f32_keys(1));
}

}  // namespace
}  // namespace selfspec
