// The CUDA attention against the CPU attention (MHA and GQA, causal and tree masks, n_past 0 and
// beyond one split, head_dim not a multiple of 32, prefill batches split into several workspace
// passes), and the GPU invariance contract: a query's output is bit-identical alone or inside a
// batch of up to 64 tokens, whatever the cache capacity (grid size), and as a tree node equal to
// the same query over its path kept at consecutive slots. A bf16 cache gives, bit for bit, the
// output of an f32 cache holding the same (rounded) values, and matches the CPU's bf16 attention.
// Cache slots past n_past + T hold NaN, so reading them would poison the output.
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cuda/attention_split.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

struct Case {
  AttentionDims dims;
  std::int64_t n_past = 0;
  std::vector<float> q;
  std::vector<float> k;  // [kv_heads][capacity][head_dim]
  std::vector<float> v;
  std::vector<std::uint8_t> mask;  // empty: causal
};

Case make_case(std::mt19937& rng, std::int64_t n_tokens, std::int64_t n_q_heads,
               std::int64_t n_kv_heads, std::int64_t head_dim, std::int64_t n_past, bool tree,
               std::int64_t spare_slots = 40) {
  Case c;
  c.dims =
      AttentionDims{n_tokens, n_q_heads, n_kv_heads, head_dim, n_past + n_tokens + spare_slots};
  c.n_past = n_past;
  c.q = random_floats(rng, static_cast<std::size_t>(n_tokens * n_q_heads * head_dim), 2.0f);
  const auto cache = static_cast<std::size_t>(n_kv_heads * c.dims.capacity * head_dim);
  c.k = random_floats(rng, cache, 1.5f);
  c.v = random_floats(rng, cache, 1.0f);
  for (std::int64_t h = 0; h < n_kv_heads; ++h) {
    for (std::int64_t s = n_past + n_tokens; s < c.dims.capacity; ++s) {
      for (std::int64_t d = 0; d < head_dim; ++d) {
        const auto i = static_cast<std::size_t>((h * c.dims.capacity + s) * head_dim + d);
        c.k[i] = std::numeric_limits<float>::quiet_NaN();
        c.v[i] = std::numeric_limits<float>::quiet_NaN();
      }
    }
  }
  if (tree) {
    // A random tree over the new tokens: token i's parent is one of 0 .. i-1 (or none); the mask
    // row holds the token and its ancestors.
    std::vector<int> parent(static_cast<std::size_t>(n_tokens), -1);
    c.mask.assign(static_cast<std::size_t>(n_tokens * n_tokens), 0);
    for (std::int64_t i = 0; i < n_tokens; ++i) {
      if (i > 0) {
        std::uniform_int_distribution<int> pick(-1, static_cast<int>(i) - 1);
        parent[static_cast<std::size_t>(i)] = i == 1 ? 0 : pick(rng);
      }
      for (int a = static_cast<int>(i); a >= 0; a = parent[static_cast<std::size_t>(a)]) {
        c.mask[static_cast<std::size_t>(i * n_tokens + a)] = 1;
      }
    }
  }
  return c;
}

std::vector<float> cpu_attention(const Case& c, float scale) {
  const cpu::AttentionShape shape{c.dims.n_tokens, c.dims.n_q_heads, c.dims.n_kv_heads,
                                  c.dims.head_dim, c.n_past,         c.dims.capacity};
  std::vector<float> out(c.q.size());
  cpu::attention(c.q.data(), c.k.data(), c.v.data(), shape,
                 c.mask.empty() ? nullptr : c.mask.data(), scale, out.data());
  return out;
}

// The device side of a case: q, caches, mask, step parameters and the workspace.
struct DeviceCase {
  DeviceBuffer<float> q;
  DeviceBuffer<float> k;
  DeviceBuffer<float> v;
  DeviceBuffer<std::uint8_t> mask;
  DeviceBuffer<StepParams> step;
  DeviceBuffer<std::uint8_t> workspace;

  explicit DeviceCase(const Case& c)
      : q(c.q),
        k(c.k),
        v(c.v),
        mask(c.mask.empty() ? std::vector<std::uint8_t>{0} : c.mask),
        step(std::vector<StepParams>{{static_cast<std::int32_t>(c.n_past), 0}}),
        workspace(attention_workspace_bytes(c.dims)) {
    workspace.zero();  // attention() needs its counters at zero before the first call
  }
};

std::vector<float> gpu_attention(const Case& c, DeviceCase& d, float scale) {
  DeviceBuffer<float> out(c.q.size());
  out.poison();
  attention(d.q.get(), d.k.get(), d.v.get(), c.dims, d.step.get(),
            c.mask.empty() ? nullptr : d.mask.get(), scale, out.get(), d.workspace.get(), nullptr);
  return out.download();
}

// A case's K and V rounded to bf16 (core/dtype.hpp's f32_to_bf16): the bf16 caches, and the case
// with f32 caches holding the rounded values (the exact reference of a bf16 cache). The NaN of the
// unused slots stays a NaN.
struct Bf16Case {
  Case rounded;
  std::vector<std::uint16_t> k;  // [kv_heads][capacity][head_dim] bf16
  std::vector<std::uint16_t> v;
};

Bf16Case round_to_bf16(const Case& c) {
  Bf16Case b{c, std::vector<std::uint16_t>(c.k.size()), std::vector<std::uint16_t>(c.v.size())};
  for (std::size_t i = 0; i < c.k.size(); ++i) {
    b.k[i] = f32_to_bf16(c.k[i]);
    b.v[i] = f32_to_bf16(c.v[i]);
    b.rounded.k[i] = bf16_to_f32(b.k[i]);
    b.rounded.v[i] = bf16_to_f32(b.v[i]);
  }
  return b;
}

std::vector<float> cpu_attention_bf16(const Bf16Case& b, float scale) {
  const Case& c = b.rounded;
  cpu::AttentionShape shape{c.dims.n_tokens, c.dims.n_q_heads, c.dims.n_kv_heads,
                            c.dims.head_dim, c.n_past,         c.dims.capacity};
  shape.kv_dtype = DType::kBF16;
  std::vector<float> out(c.q.size());
  cpu::attention(c.q.data(), b.k.data(), b.v.data(), shape,
                 c.mask.empty() ? nullptr : c.mask.data(), scale, out.data());
  return out;
}

// The CUDA attention over the bf16 caches (a fresh workspace, the output poisoned first).
std::vector<float> gpu_attention_bf16(const Bf16Case& b, float scale) {
  const Case& c = b.rounded;
  AttentionDims dims = c.dims;
  dims.kv_dtype = DType::kBF16;
  DeviceBuffer<float> q(c.q);
  DeviceBuffer<std::uint16_t> k(b.k);
  DeviceBuffer<std::uint16_t> v(b.v);
  DeviceBuffer<std::uint8_t> mask(c.mask.empty() ? std::vector<std::uint8_t>{0} : c.mask);
  DeviceBuffer<StepParams> step(std::vector<StepParams>{{static_cast<std::int32_t>(c.n_past), 0}});
  DeviceBuffer<std::uint8_t> workspace(attention_workspace_bytes(dims));
  workspace.zero();
  DeviceBuffer<float> out(c.q.size());
  out.poison();
  attention(q.get(), k.get(), v.get(), dims, step.get(), c.mask.empty() ? nullptr : mask.get(),
            scale, out.get(), workspace.get(), nullptr);
  return out.download();
}

struct Config {
  std::int64_t n_tokens;
  std::int64_t n_q_heads;
  std::int64_t n_kv_heads;
  std::int64_t head_dim;
  std::int64_t n_past;
  bool tree;
};

constexpr Config kConfigs[] = {
    {1, 8, 2, 64, 0, false},     {1, 8, 2, 128, 700, false},  {2, 4, 4, 64, 255, false},
    {5, 8, 2, 128, 0, false},    {5, 8, 2, 128, 300, true},   {13, 8, 2, 64, 1000, false},
    {16, 8, 2, 128, 513, false}, {16, 8, 2, 64, 250, true},   {16, 4, 1, 80, 257, true},
    {7, 6, 3, 16, 40, false},    {3, 2, 1, 256, 600, false},  {64, 8, 2, 64, 100, false},
    {40, 4, 2, 32, 0, true},     {64, 4, 2, 128, 2500, true}, {1, 8, 8, 128, 5000, false},
    {2, 4, 1, 8, 3, false},
};

TEST(CudaAttention, MatchesCpu) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(31);
  for (const Config& config : kConfigs) {
    SCOPED_TRACE(::testing::Message()
                 << "T " << config.n_tokens << " heads " << config.n_q_heads << "/"
                 << config.n_kv_heads << " head_dim " << config.head_dim << " n_past "
                 << config.n_past << (config.tree ? " tree" : " causal"));
    const Case c = make_case(rng, config.n_tokens, config.n_q_heads, config.n_kv_heads,
                             config.head_dim, config.n_past, config.tree);
    const float scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
    DeviceCase d(c);
    // Outputs are convex combinations of V rows (|v| <= 1): an absolute tolerance.
    expect_close(gpu_attention(c, d, scale), cpu_attention(c, scale), 0.0, 2e-5, "attention");
  }
}

// A bf16 cache (K and V rounded to nearest even) gives, bit for bit, the output of the same kernel
// over an f32 cache holding the rounded values: the widening is exact and everything after the
// load is the same f32 arithmetic. Head dims 64, 128 and 256 (contiguous lanes: 4-, 8- and 16-byte
// bf16 loads) and 8, 16, 40, 80, 96 (strided lanes), T = 1 and batches of up to 64, causal and tree
// masks, MHA and GQA, n_past 0 and beyond one split. The output also matches the CPU attention over
// the same bf16 cache to the tolerance of the f32 comparison.
TEST(CudaAttention, Bf16CacheGivesTheBitsOfItsValuesInF32) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(37);
  constexpr Config kBf16Configs[] = {
      {1, 8, 2, 64, 0, false},     {1, 8, 2, 128, 700, false},  {1, 4, 1, 80, 300, false},
      {1, 8, 2, 96, 1000, false},  {1, 8, 2, 80, 50, true},     {1, 8, 8, 128, 5000, false},
      {5, 8, 2, 128, 300, true},   {13, 8, 2, 64, 1000, false}, {16, 8, 2, 64, 250, true},
      {16, 4, 1, 80, 257, true},   {40, 4, 2, 96, 33, true},    {9, 4, 2, 40, 100, false},
      {64, 8, 2, 128, 2500, true}, {64, 8, 2, 64, 100, false},  {3, 2, 1, 256, 600, false},
      {7, 6, 3, 16, 40, false},    {2, 4, 1, 8, 3, false},
  };
  for (const Config& config : kBf16Configs) {
    SCOPED_TRACE(::testing::Message()
                 << "T " << config.n_tokens << " heads " << config.n_q_heads << "/"
                 << config.n_kv_heads << " head_dim " << config.head_dim << " n_past "
                 << config.n_past << (config.tree ? " tree" : " causal"));
    const Bf16Case b =
        round_to_bf16(make_case(rng, config.n_tokens, config.n_q_heads, config.n_kv_heads,
                                config.head_dim, config.n_past, config.tree));
    const float scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
    DeviceCase d_rounded(b.rounded);
    const std::vector<float> f32_out = gpu_attention(b.rounded, d_rounded, scale);
    const std::vector<float> bf16_out = gpu_attention_bf16(b, scale);
    EXPECT_TRUE(same_bits(bf16_out, f32_out)) << "bf16 cache vs f32 cache of the same values";
    expect_close(bf16_out, cpu_attention_bf16(b, scale), 0.0, 2e-5, "bf16 attention vs the CPU");
  }
}

TEST(CudaAttention, QueryIsBitIdenticalAloneOrInABatchAndForAnyCapacity) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(32);
  for (const std::int64_t n_past : {std::int64_t{0}, std::int64_t{250}, std::int64_t{700}}) {
    for (const std::int64_t n_tokens :
         {std::int64_t{2}, std::int64_t{5}, std::int64_t{16}, std::int64_t{40}}) {
      SCOPED_TRACE(::testing::Message() << "n_past " << n_past << " T " << n_tokens);
      const std::int64_t q_heads = 8;
      const std::int64_t head_dim = 128;
      const Case batch = make_case(rng, n_tokens, q_heads, 2, head_dim, n_past, false, 300);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      DeviceCase d_batch(batch);
      const std::vector<float> batch_out = gpu_attention(batch, d_batch, scale);
      const auto row = static_cast<std::size_t>(q_heads * head_dim);
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        // Query t alone: the same cache, n_past + t slots before it, one token.
        Case single = batch;
        single.n_past = n_past + t;
        single.dims.n_tokens = 1;
        single.q.assign(batch.q.begin() + static_cast<std::ptrdiff_t>(t * row),
                        batch.q.begin() + static_cast<std::ptrdiff_t>((t + 1) * row));
        DeviceCase d_single(single);
        const std::vector<float> alone = gpu_attention(single, d_single, scale);
        const std::vector<float> in_batch(
            batch_out.begin() + static_cast<std::ptrdiff_t>(t * row),
            batch_out.begin() + static_cast<std::ptrdiff_t>((t + 1) * row));
        EXPECT_TRUE(same_bits(alone, in_batch)) << "token " << t;

        // The same query with a larger cache (more chunks in the grid).
        Case wide = single;
        const std::int64_t extra = 1000;
        wide.dims.capacity = single.dims.capacity + extra;
        wide.k.clear();
        wide.v.clear();
        for (std::int64_t h = 0; h < 2; ++h) {
          const auto begin = static_cast<std::ptrdiff_t>(h * single.dims.capacity * head_dim);
          const auto end = begin + static_cast<std::ptrdiff_t>(single.dims.capacity * head_dim);
          wide.k.insert(wide.k.end(), single.k.begin() + begin, single.k.begin() + end);
          wide.v.insert(wide.v.end(), single.v.begin() + begin, single.v.begin() + end);
          wide.k.insert(wide.k.end(), static_cast<std::size_t>(extra * head_dim),
                        std::numeric_limits<float>::quiet_NaN());
          wide.v.insert(wide.v.end(), static_cast<std::size_t>(extra * head_dim),
                        std::numeric_limits<float>::quiet_NaN());
        }
        DeviceCase d_wide(wide);
        EXPECT_TRUE(same_bits(gpu_attention(wide, d_wide, scale), alone))
            << "token " << t << " with a larger capacity";
      }
    }
  }
}

// A tree node's output equals, bit for bit, the same query over its path kept at consecutive
// slots (what plain decoding of the accepted path computes): the splits follow the visible keys,
// not their slots.
TEST(CudaAttention, TreeQueryIsBitIdenticalToItsPathKeptInOrder) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(34);
  for (const std::int64_t n_past : {std::int64_t{0}, std::int64_t{29}, std::int64_t{700}}) {
    for (const std::int64_t head_dim : {std::int64_t{64}, std::int64_t{128}, std::int64_t{80}}) {
      SCOPED_TRACE(::testing::Message() << "n_past " << n_past << " head_dim " << head_dim);
      const std::int64_t n_tokens = 48;
      const std::int64_t q_heads = 4;
      const std::int64_t kv_heads = 2;
      const Case tree = make_case(rng, n_tokens, q_heads, kv_heads, head_dim, n_past, true, 8);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      DeviceCase d_tree(tree);
      const std::vector<float> tree_out = gpu_attention(tree, d_tree, scale);
      const auto row = static_cast<std::size_t>(q_heads * head_dim);
      for (const std::int64_t t : {std::int64_t{1}, std::int64_t{17}, n_tokens - 1}) {
        // The path of node t (its ancestors and itself, ascending) moved to slots n_past, ...
        std::vector<std::int64_t> path;
        for (std::int64_t j = 0; j <= t; ++j) {
          if (tree.mask[static_cast<std::size_t>(t * n_tokens + j)] != 0) path.push_back(j);
        }
        Case kept = tree;
        kept.n_past = n_past + static_cast<std::int64_t>(path.size()) - 1;
        kept.dims.n_tokens = 1;
        kept.mask.clear();
        kept.q.assign(tree.q.begin() + static_cast<std::ptrdiff_t>(t * row),
                      tree.q.begin() + static_cast<std::ptrdiff_t>((t + 1) * row));
        for (std::int64_t h = 0; h < kv_heads; ++h) {
          for (std::size_t i = 0; i < path.size(); ++i) {
            const std::int64_t from = (h * tree.dims.capacity + n_past + path[i]) * head_dim;
            const std::int64_t to =
                (h * tree.dims.capacity + n_past + static_cast<std::int64_t>(i)) * head_dim;
            for (std::int64_t d = 0; d < head_dim; ++d) {
              kept.k[static_cast<std::size_t>(to + d)] = tree.k[static_cast<std::size_t>(from + d)];
              kept.v[static_cast<std::size_t>(to + d)] = tree.v[static_cast<std::size_t>(from + d)];
            }
          }
        }
        DeviceCase d_kept(kept);
        const std::vector<float> node(
            tree_out.begin() + static_cast<std::ptrdiff_t>(t * row),
            tree_out.begin() + static_cast<std::ptrdiff_t>((t + 1) * row));
        EXPECT_TRUE(same_bits(gpu_attention(kept, d_kept, scale), node))
            << "node " << t << " (path of " << path.size() << ")";
      }
    }
  }
}

// One workspace serving calls of different token counts and capacities in turn (as the backend's
// does: decode steps, verifications, other caches), each query with several splits: every call
// gives the bits of the same call on a fresh workspace.
TEST(CudaAttention, AWorkspaceSharedByCallsOfDifferentSizesGivesFreshBits) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(36);
  const float scale = 1.0f / std::sqrt(64.0f);
  std::vector<Case> cases;
  cases.push_back(make_case(rng, 40, 8, 2, 64, 70, false, 20));
  cases.push_back(make_case(rng, 1, 8, 2, 64, 100, false, 20));
  cases.push_back(make_case(rng, 9, 8, 2, 64, 90, true, 20));
  cases.push_back(make_case(rng, 1, 8, 2, 64, 300, false, 500));
  cases.push_back(make_case(rng, 40, 8, 2, 64, 33, false, 3));
  std::size_t bytes = 0;
  for (const Case& c : cases) bytes = std::max(bytes, attention_workspace_bytes(c.dims));
  DeviceBuffer<std::uint8_t> shared(bytes);
  shared.zero();
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "round " << round << " case " << i);
      const Case& c = cases[i];
      DeviceCase fresh(c);
      const std::vector<float> expected = gpu_attention(c, fresh, scale);
      DeviceBuffer<float> out(c.q.size());
      out.poison();
      attention(fresh.q.get(), fresh.k.get(), fresh.v.get(), c.dims, fresh.step.get(),
                c.mask.empty() ? nullptr : fresh.mask.get(), scale, out.get(), shared.get(),
                nullptr);
      EXPECT_TRUE(same_bits(out.download(), expected));
    }
  }
}

TEST(CudaAttention, PrefillSplitIntoSeveralWorkspacePassesMatchesCpu) {
  SELFSPEC_REQUIRE_GPU();
  // 32 query heads over 66,560 slots of capacity: 64 splits per query, about 1 MB of partials per
  // token, so the 64 MiB workspace budget holds 64 tokens and 150 tokens run in 3 passes.
  std::mt19937 rng(33);
  const std::int64_t n_tokens = 150;
  const std::int64_t head_dim = 128;
  const std::int64_t n_past = 300;
  const std::int64_t capacity = 260 * 256;
  const Case c =
      make_case(rng, n_tokens, 32, 2, head_dim, n_past, false, capacity - n_past - n_tokens);
  ASSERT_EQ(c.dims.capacity, capacity);
  ASSERT_EQ(attention_grid_splits(capacity), kAttentionMaxSplits);
  EXPECT_LT(attention_workspace_bytes(c.dims), static_cast<std::size_t>(n_tokens) * 32 *
                                                   kAttentionMaxSplits * (head_dim + 2) *
                                                   sizeof(float));
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  DeviceCase d(c);
  expect_close(gpu_attention(c, d, scale), cpu_attention(c, scale), 0.0, 2e-5, "attention");
  // The workspace is left ready: a second call gives the same bits.
  const std::vector<float> first = gpu_attention(c, d, scale);
  EXPECT_TRUE(same_bits(gpu_attention(c, d, scale), first));
}

TEST(CudaAttention, BadShapesThrow) {
  SELFSPEC_REQUIRE_GPU();
  EXPECT_THROW(attention_workspace_bytes(AttentionDims{1, 6, 4, 64, 16}), Error);   // 6 % 4
  EXPECT_THROW(attention_workspace_bytes(AttentionDims{1, 8, 2, 512, 16}), Error);  // head_dim
  EXPECT_THROW(attention_workspace_bytes(AttentionDims{17, 8, 2, 64, 16}), Error);  // capacity
  // A tree mask over more than kSmallBatch tokens.
  std::mt19937 rng(35);
  Case c = make_case(rng, kSmallBatch + 1, 2, 1, 64, 0, true, 0);
  DeviceCase d(c);
  DeviceBuffer<float> out(c.q.size());
  EXPECT_THROW(attention(d.q.get(), d.k.get(), d.v.get(), c.dims, d.step.get(), d.mask.get(), 1.0f,
                         out.get(), d.workspace.get(), nullptr),
               Error);
  // A KV cache of f16: only f32 and bf16 caches are read.
  const Case small = make_case(rng, 2, 2, 1, 64, 3, false);
  DeviceCase d_small(small);
  AttentionDims f16 = small.dims;
  f16.kv_dtype = DType::kF16;
  DeviceBuffer<float> small_out(small.q.size());
  EXPECT_THROW(attention(d_small.q.get(), d_small.k.get(), d_small.v.get(), f16, d_small.step.get(),
                         nullptr, 1.0f, small_out.get(), d_small.workspace.get(), nullptr),
               Error);
}

}  // namespace
}  // namespace selfspec::kernels::cuda::test
