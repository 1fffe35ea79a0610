// The CUDA elementwise and row-wise kernels against the CPU kernels: embedding (exact), RMSNorm
// and the fused add + RMSNorm (the double sum differs in order only), residual add and bias
// (exact), SwiGLU (device expf, a few ulp), RoPE (cos and sin read from a RoPE table filled on the
// host by cpu::fill_rope_table: the CPU's bits; positions outside the table left alone), KV-cache
// writes, RoPE fused with the KV write (the same bits as the two kernels), both into a bf16 cache
// (the f32 results rounded by core/dtype.hpp's f32_to_bf16, bit for bit), row gathers, column
// scatters and activation conversion (exact). Outputs are poisoned with
// NaN first.
#include "core/dtype.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/scatter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ios>
#include <iterator>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

constexpr std::int64_t kDims[] = {1, 17, 64, 1000, 4099, 8192, 9000};
constexpr std::int64_t kTokenCounts[] = {1, 2, 5, 13};

// f32 inputs that bf16 rounding must get right: ties to even (down and up), above and below the
// half, a carry into the exponent, NaNs (quiet with a payload; signalling and negative, whose
// truncation would be an infinity), subnormals (ties, and one rounding up to the smallest normal),
// the largest float (rounding to infinity), -0 and -inf.
constexpr std::uint32_t kBf16RoundingBits[] = {
    0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x3f804000u, 0xbf7fffffu, 0x7fc00001u, 0xff800001u,
    0x00008000u, 0x00018000u, 0x807fffffu, 0x7f7fffffu, 0x80000000u, 0xff800000u,
};

// x with its first elements (as many as fit) replaced by kBf16RoundingBits.
std::vector<float> with_rounding_cases(std::vector<float> x) {
  for (std::size_t i = 0; i < x.size() && i < std::size(kBf16RoundingBits); ++i) {
    x[i] = std::bit_cast<float>(kBf16RoundingBits[i]);
  }
  return x;
}

std::vector<std::uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = f32_to_bf16(x[i]);
  return out;
}

// actual[i] == f32_to_bf16(f32[i]) for every element; reports the first few that differ.
void expect_bf16_of(const std::vector<std::uint16_t>& actual, const std::vector<float>& f32,
                    const char* what) {
  ASSERT_EQ(actual.size(), f32.size()) << what;
  int failures = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const std::uint16_t expected = f32_to_bf16(f32[i]);
    if (actual[i] != expected && ++failures <= 5) {
      ADD_FAILURE() << what << ": element " << i << " (f32 bits 0x" << std::hex
                    << std::bit_cast<std::uint32_t>(f32[i]) << ") holds 0x" << actual[i]
                    << ", expected 0x" << expected << std::dec;
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << actual.size() << " differ";
}

// scatter_columns: the same bits as the CPU kernel (a copy) at several shapes, ids in random
// order, including no ids and every column.
TEST(CudaScatterColumns, MatchesCpuExactly) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(21);
  struct Shape {
    std::int64_t rows, width, n_ids;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{1, 64, 0}, Shape{3, 64, 64}, Shape{2, 4099, 100},
                        Shape{13, 49152, 4096}}) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.width << " ids " << s.n_ids);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(s.width));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i);
    std::shuffle(ids.begin(), ids.end(), rng);
    ids.resize(static_cast<std::size_t>(s.n_ids));
    const std::vector<float> values =
        random_floats(rng, static_cast<std::size_t>(s.rows * s.n_ids), 3.0f);
    std::vector<float> expected(static_cast<std::size_t>(s.rows * s.width));
    cpu::scatter_columns(values.data(), s.rows, ids.data(), s.n_ids, s.width, -INFINITY,
                         expected.data());
    DeviceBuffer<std::int32_t> d_ids(ids);
    DeviceBuffer<float> d_values(values);
    DeviceBuffer<float> d_out(expected.size());
    d_out.poison();
    scatter_columns(d_values.get(), s.rows, d_ids.get(), s.n_ids, s.width, -INFINITY, d_out.get(),
                    nullptr);
    EXPECT_TRUE(same_bits(d_out.download(), expected));
  }
}

TEST(CudaEmbedding, MatchesCpuExactly) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(1);
  const std::int64_t vocab_begin = 100;
  const std::vector<std::int32_t> tokens = {100, 149, 99, 150, 120, 0, 125, 149};
  for (const DType dtype : kAllDtypes) {
    for (const std::int64_t dim : {std::int64_t{1}, std::int64_t{77}, std::int64_t{512}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " dim " << dim);
      const StoredWeights table = random_weights(rng, dtype, 50, dim);
      const DeviceWeights d_table = upload_weights(table);
      const auto n_tokens = static_cast<std::int64_t>(tokens.size());
      std::vector<float> expected(static_cast<std::size_t>(n_tokens * dim));
      cpu::embedding_lookup(cpu_view(table), vocab_begin, tokens.data(), n_tokens, expected.data());
      DeviceBuffer<std::int32_t> d_tokens(tokens);
      DeviceBuffer<float> d_out(expected.size());
      d_out.poison();
      embedding(d_table.view, vocab_begin, d_tokens.get(), n_tokens, d_out.get(), nullptr);
      EXPECT_TRUE(same_bits(d_out.download(), expected));
    }
  }
}

TEST(CudaRmsNorm, MatchesCpu) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(2);
  const float eps = 1e-5f;
  for (const std::int64_t dim : kDims) {
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " T " << n_tokens);
      const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(n_tokens * dim), 3);
      const std::vector<float> weight = random_floats(rng, static_cast<std::size_t>(dim), 2);
      std::vector<float> expected(x.size());
      cpu::rmsnorm(x.data(), weight.data(), eps, n_tokens, dim, expected.data());

      DeviceBuffer<float> d_x(x);
      DeviceBuffer<float> d_weight(weight);
      DeviceBuffer<float> d_y(x.size());
      d_y.poison();
      rmsnorm(d_x.get(), d_weight.get(), eps, n_tokens, dim, d_y.get(), nullptr);
      expect_close(d_y.download(), expected, 1e-6, 1e-30, "rmsnorm");
      EXPECT_TRUE(same_bits(d_x.download(), x)) << "the input must be untouched";

      // In place (y aliases x).
      rmsnorm(d_x.get(), d_weight.get(), eps, n_tokens, dim, d_x.get(), nullptr);
      expect_close(d_x.download(), expected, 1e-6, 1e-30, "rmsnorm in place");
    }
  }
}

TEST(CudaAddRmsNorm, MatchesCpuAddThenNorm) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(3);
  const float eps = 1e-6f;
  for (const std::int64_t dim : kDims) {
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " T " << n_tokens);
      const auto n = static_cast<std::size_t>(n_tokens * dim);
      std::vector<float> x = random_floats(rng, n, 2);
      const std::vector<float> delta = random_floats(rng, n, 2);
      const std::vector<float> weight = random_floats(rng, static_cast<std::size_t>(dim), 2);
      DeviceBuffer<float> d_x(x);
      DeviceBuffer<float> d_delta(delta);
      DeviceBuffer<float> d_weight(weight);
      DeviceBuffer<float> d_y(n);
      d_y.poison();
      add_rmsnorm(d_x.get(), d_delta.get(), d_weight.get(), eps, n_tokens, dim, d_y.get(), nullptr);

      cpu::add_inplace(x.data(), delta.data(), static_cast<std::int64_t>(n));
      std::vector<float> expected(n);
      cpu::rmsnorm(x.data(), weight.data(), eps, n_tokens, dim, expected.data());
      EXPECT_TRUE(same_bits(d_x.download(), x)) << "the residual sum must be exact";
      expect_close(d_y.download(), expected, 1e-6, 1e-30, "add_rmsnorm");
    }
  }
}

TEST(CudaAddAndBias, MatchCpuExactly) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(4);
  for (const std::int64_t dim : kDims) {
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " T " << n_tokens);
      const auto n = static_cast<std::size_t>(n_tokens * dim);
      std::vector<float> x = random_floats(rng, n, 4);
      const std::vector<float> y = random_floats(rng, n, 4);
      const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(dim), 4);
      DeviceBuffer<float> d_x(x);
      DeviceBuffer<float> d_y(y);
      DeviceBuffer<float> d_bias(bias);
      add_inplace(d_x.get(), d_y.get(), static_cast<std::int64_t>(n), nullptr);
      add_bias(d_x.get(), d_bias.get(), n_tokens, dim, nullptr);
      cpu::add_inplace(x.data(), y.data(), static_cast<std::int64_t>(n));
      cpu::add_bias(x.data(), bias.data(), n_tokens, dim);
      EXPECT_TRUE(same_bits(d_x.download(), x));
    }
  }
}

TEST(CudaSwiglu, MatchesCpu) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(5);
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{11008 * 3 + 5}}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const std::vector<float> gate = random_floats(rng, static_cast<std::size_t>(n), 9);
    const std::vector<float> up = random_floats(rng, static_cast<std::size_t>(n), 3);
    std::vector<float> expected(gate.size());
    cpu::swiglu(gate.data(), up.data(), expected.data(), n);
    DeviceBuffer<float> d_gate(gate);
    DeviceBuffer<float> d_up(up);
    DeviceBuffer<float> d_out(gate.size());
    d_out.poison();
    swiglu(d_gate.get(), d_up.get(), d_out.get(), n, nullptr);
    expect_close(d_out.download(), expected, 2e-6, 1e-30, "swiglu");
    // out aliasing gate
    swiglu(d_gate.get(), d_up.get(), d_gate.get(), n, nullptr);
    expect_close(d_gate.download(), expected, 2e-6, 1e-30, "swiglu in place");
  }
}

std::vector<float> llama_inv_freq(std::int64_t head_dim, double theta) {
  std::vector<float> inv_freq(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] = static_cast<float>(
        1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim)));
  }
  return inv_freq;
}

// One past the largest position: the rows a RoPE table needs to cover every position of a test.
std::int64_t table_rows(const std::vector<std::int32_t>& positions) {
  return std::int64_t{*std::max_element(positions.begin(), positions.end())} + 1;
}

// A RoPE table of inv_freq for positions [0, rows) on the device (kernels/cpu/rope.hpp's layout:
// row p is head_dim / 2 cosines, then head_dim / 2 sines). Only the rows of `used` (those inside
// [0, rows)) are filled, by cpu::fill_rope_table; every other row is NaN, so a kernel that read a
// wrong row could not match the CPU.
DeviceBuffer<float> device_rope_table(const std::vector<float>& inv_freq, std::int64_t rows,
                                      const std::vector<std::int32_t>& used) {
  const auto head_dim = static_cast<std::int64_t>(2 * inv_freq.size());
  std::vector<float> host(static_cast<std::size_t>(rows * head_dim),
                          std::numeric_limits<float>::quiet_NaN());
  for (const std::int32_t p : used) {
    if (p >= 0 && p < rows) {
      cpu::fill_rope_table(inv_freq, p, 1, host.data() + std::int64_t{p} * head_dim);
    }
  }
  return DeviceBuffer<float>(host);
}

// rope = cpu::apply_rope bit for bit: the kernel reads the (cos, sin) the host computed into the
// table and rotates with the same rope_rotate (kernels/shared_math.hpp, never fused), so no
// tolerance (before the table, the device's own double cos/sin could round differently). The
// row padding stays as it was.
TEST(CudaRope, MatchesCpuBitForBitAndLeavesTheRowPaddingAlone) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(6);
  const std::vector<std::int32_t> positions = {0, 1, 17, 1000, 4095, 131071};
  const auto n_tokens = static_cast<std::int64_t>(positions.size());
  DeviceBuffer<std::int32_t> d_positions(positions);
  for (const std::int64_t head_dim : {std::int64_t{2}, std::int64_t{64}, std::int64_t{128}}) {
    const std::vector<float> inv_freq = llama_inv_freq(head_dim, 500000.0);
    const std::int64_t rows = table_rows(positions);
    const DeviceBuffer<float> d_table = device_rope_table(inv_freq, rows, positions);
    for (const std::int64_t n_heads : {std::int64_t{1}, std::int64_t{3}}) {
      SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << " heads " << n_heads);
      const std::int64_t row_stride = n_heads * head_dim + 5;  // 5 floats that must not change
      const std::vector<float> x =
          random_floats(rng, static_cast<std::size_t>(n_tokens * row_stride), 2);
      std::vector<float> expected = x;
      cpu::apply_rope(expected.data(), n_tokens, row_stride, n_heads, head_dim, positions.data(),
                      inv_freq);
      DeviceBuffer<float> d_x(x);
      rope(d_x.get(), n_tokens, row_stride, n_heads, head_dim, d_positions.get(), d_table.get(),
           rows, nullptr);
      const std::vector<float> actual = d_x.download();
      EXPECT_TRUE(same_bits(actual, expected)) << "rope must give apply_rope's bits";
      expect_close(actual, expected, 0.0, 0.0, "rope");  // names the first elements that differ
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        for (std::int64_t i = n_heads * head_dim; i < row_stride; ++i) {
          const auto index = static_cast<std::size_t>(t * row_stride + i);
          EXPECT_EQ(actual[index], x[index]) << "padding at token " << t;
        }
      }
    }
  }
}

TEST(CudaWriteKv, WritesTheNewSlotsOnly) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(7);
  const std::int64_t kv_heads = 2;
  const std::int64_t head_dim = 24;
  const std::int64_t capacity = 40;
  for (const std::int64_t n_past : {std::int64_t{0}, std::int64_t{5}, std::int64_t{35}}) {
    for (const std::int64_t n_tokens : {std::int64_t{1}, std::int64_t{5}}) {
      SCOPED_TRACE(::testing::Message() << "n_past " << n_past << " T " << n_tokens);
      const auto row = static_cast<std::size_t>(kv_heads * head_dim);
      const std::vector<float> k = random_floats(rng, static_cast<std::size_t>(n_tokens) * row);
      const std::vector<float> v = random_floats(rng, static_cast<std::size_t>(n_tokens) * row);
      const auto cache_size = static_cast<std::size_t>(kv_heads * capacity * head_dim);
      const std::vector<float> k_before = random_floats(rng, cache_size);
      const std::vector<float> v_before = random_floats(rng, cache_size);
      DeviceBuffer<float> d_k(k);
      DeviceBuffer<float> d_v(v);
      DeviceBuffer<float> d_k_cache(k_before);
      DeviceBuffer<float> d_v_cache(v_before);
      DeviceBuffer<StepParams> d_step(
          std::vector<StepParams>{{static_cast<std::int32_t>(n_past), 0}});
      write_kv(d_k.get(), d_v.get(), n_tokens, kv_heads, head_dim, capacity, d_step.get(),
               d_k_cache.get(), d_v_cache.get(), DType::kF32, nullptr);
      std::vector<float> k_expected = k_before;
      std::vector<float> v_expected = v_before;
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        for (std::int64_t h = 0; h < kv_heads; ++h) {
          for (std::int64_t d = 0; d < head_dim; ++d) {
            const auto src = static_cast<std::size_t>((t * kv_heads + h) * head_dim + d);
            const auto dst = static_cast<std::size_t>((h * capacity + n_past + t) * head_dim + d);
            k_expected[dst] = k[src];
            v_expected[dst] = v[src];
          }
        }
      }
      EXPECT_TRUE(same_bits(d_k_cache.download(), k_expected));
      EXPECT_TRUE(same_bits(d_v_cache.download(), v_expected));
    }
  }
}

// write_kv into a bf16 cache: every element of the cache equals f32_to_bf16 of the same element of
// an f32 cache after the same write (the new slots rounded from k and v, including the rounding
// cases above; the other slots as they were), for a head_dim on no vector boundary and one of 128.
TEST(CudaWriteKv, Bf16CacheHoldsTheF32WriteRounded) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(17);
  const std::int64_t kv_heads = 2;
  const std::int64_t capacity = 40;
  for (const std::int64_t head_dim : {std::int64_t{24}, std::int64_t{128}}) {
    for (const std::int64_t n_past : {std::int64_t{0}, std::int64_t{5}, std::int64_t{35}}) {
      for (const std::int64_t n_tokens : {std::int64_t{1}, std::int64_t{5}}) {
        SCOPED_TRACE(::testing::Message()
                     << "head_dim " << head_dim << " n_past " << n_past << " T " << n_tokens);
        const auto row = static_cast<std::size_t>(kv_heads * head_dim);
        const std::vector<float> k =
            with_rounding_cases(random_floats(rng, static_cast<std::size_t>(n_tokens) * row, 3.0f));
        std::vector<float> v = random_floats(rng, static_cast<std::size_t>(n_tokens) * row, 3.0f);
        std::reverse(v.begin(), v.end());  // the rounding cases at the other end of v
        v = with_rounding_cases(std::move(v));
        std::reverse(v.begin(), v.end());
        const auto cache_size = static_cast<std::size_t>(kv_heads * capacity * head_dim);
        const std::vector<float> k_before = random_floats(rng, cache_size);
        const std::vector<float> v_before = random_floats(rng, cache_size);
        DeviceBuffer<float> d_k(k);
        DeviceBuffer<float> d_v(v);
        DeviceBuffer<StepParams> d_step(
            std::vector<StepParams>{{static_cast<std::int32_t>(n_past), 0}});
        DeviceBuffer<float> k_f32(k_before);
        DeviceBuffer<float> v_f32(v_before);
        write_kv(d_k.get(), d_v.get(), n_tokens, kv_heads, head_dim, capacity, d_step.get(),
                 k_f32.get(), v_f32.get(), DType::kF32, nullptr);
        DeviceBuffer<std::uint16_t> k_bf16(to_bf16(k_before));
        DeviceBuffer<std::uint16_t> v_bf16(to_bf16(v_before));
        write_kv(d_k.get(), d_v.get(), n_tokens, kv_heads, head_dim, capacity, d_step.get(),
                 k_bf16.get(), v_bf16.get(), DType::kBF16, nullptr);
        const std::vector<float> k_expected = k_f32.download();
        const std::vector<float> v_expected = v_f32.download();
        // The f32 write is a copy: the rounding cases arrive in the f32 cache unchanged.
        const auto first = static_cast<std::size_t>(n_past * head_dim);
        EXPECT_EQ(std::bit_cast<std::uint32_t>(k_expected[first]), kBf16RoundingBits[0]);
        expect_bf16_of(k_bf16.download(), k_expected, "key cache");
        expect_bf16_of(v_bf16.download(), v_expected, "value cache");
      }
    }
  }
}

// rope_write_kv = rope(q), rope(k), write_kv(k, v), bit for bit, for q present or absent (the
// exit head's K/V branch), several head counts and dims, and slots past the cache left alone.
TEST(CudaRopeWriteKv, EqualsRopeThenWriteKv) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(8);
  const std::vector<std::int32_t> positions = {3, 4, 9, 1000, 70000};
  const auto n_tokens = static_cast<std::int64_t>(positions.size());
  for (const std::int64_t head_dim : {std::int64_t{8}, std::int64_t{64}, std::int64_t{128}}) {
    for (const bool with_q : {true, false}) {
      for (const std::int64_t n_past : {std::int64_t{0}, std::int64_t{30}}) {
        SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << (with_q ? " q" : " no q")
                                          << " n_past " << n_past);
        const std::int64_t q_heads = 6;
        const std::int64_t kv_heads = 2;
        const std::int64_t capacity = 40;
        const std::int64_t q_stride = q_heads * head_dim;
        const std::int64_t kv_row = kv_heads * head_dim;
        const std::vector<float> inv_freq = llama_inv_freq(head_dim, 10000.0);
        const std::int64_t rows = table_rows(positions);
        const DeviceBuffer<float> d_table = device_rope_table(inv_freq, rows, positions);
        const std::vector<float> q =
            random_floats(rng, static_cast<std::size_t>(n_tokens * q_stride));
        const std::vector<float> k =
            random_floats(rng, static_cast<std::size_t>(n_tokens * kv_row));
        const std::vector<float> v =
            random_floats(rng, static_cast<std::size_t>(n_tokens * kv_row));
        const auto cache_size = static_cast<std::size_t>(kv_heads * capacity * head_dim);
        const std::vector<float> cache_before = random_floats(rng, cache_size);
        DeviceBuffer<std::int32_t> d_positions(positions);
        DeviceBuffer<StepParams> d_step(
            std::vector<StepParams>{{static_cast<std::int32_t>(n_past), 0}});
        // Reference: the separate kernels.
        DeviceBuffer<float> q_ref(q), k_ref(k), v_ref(v), kc_ref(cache_before),
            vc_ref(cache_before);
        if (with_q) {
          rope(q_ref.get(), n_tokens, q_stride, q_heads, head_dim, d_positions.get(), d_table.get(),
               rows, nullptr);
        }
        rope(k_ref.get(), n_tokens, kv_row, kv_heads, head_dim, d_positions.get(), d_table.get(),
             rows, nullptr);
        write_kv(k_ref.get(), v_ref.get(), n_tokens, kv_heads, head_dim, capacity, d_step.get(),
                 kc_ref.get(), vc_ref.get(), DType::kF32, nullptr);
        // Fused.
        DeviceBuffer<float> q_f(q), k_f(k), v_f(v), kc_f(cache_before), vc_f(cache_before);
        RopeKvArgs args;
        args.q = with_q ? q_f.get() : nullptr;
        args.q_stride = q_stride;
        args.n_q_heads = q_heads;
        args.k = k_f.get();
        args.k_stride = kv_row;
        args.v = v_f.get();
        args.kv_heads = kv_heads;
        args.head_dim = head_dim;
        args.capacity = capacity;
        rope_write_kv(args, n_tokens, d_positions.get(), d_table.get(), rows, d_step.get(),
                      kc_f.get(), vc_f.get(), nullptr);
        EXPECT_TRUE(same_bits(q_f.download(), q_ref.download())) << "q";
        EXPECT_TRUE(same_bits(k_f.download(), k_ref.download())) << "k";
        EXPECT_TRUE(same_bits(kc_f.download(), kc_ref.download())) << "key cache";
        EXPECT_TRUE(same_bits(vc_f.download(), vc_ref.download())) << "value cache";
      }
    }
  }
}

// rope_write_kv into a bf16 cache: q and the rotated k rows are the bits of the same call with an
// f32 cache, and every element of the bf16 cache is f32_to_bf16 of the f32 cache's (rotated K rows
// and copied V rows rounded, with the rounding cases in k and v; the other slots as they were).
TEST(CudaRopeWriteKv, Bf16CacheHoldsTheF32ResultRounded) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(18);
  const std::vector<std::int32_t> positions = {3, 4, 9, 1000, 70000};
  const auto n_tokens = static_cast<std::int64_t>(positions.size());
  for (const std::int64_t head_dim : {std::int64_t{8}, std::int64_t{64}, std::int64_t{128}}) {
    for (const bool with_q : {true, false}) {
      for (const std::int64_t n_past : {std::int64_t{0}, std::int64_t{30}}) {
        SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << (with_q ? " q" : " no q")
                                          << " n_past " << n_past);
        const std::int64_t q_heads = 6;
        const std::int64_t kv_heads = 2;
        const std::int64_t capacity = 40;
        const std::int64_t q_stride = q_heads * head_dim;
        const std::int64_t kv_row = kv_heads * head_dim;
        const std::vector<float> inv_freq = llama_inv_freq(head_dim, 10000.0);
        const std::int64_t rows = table_rows(positions);
        const DeviceBuffer<float> d_table = device_rope_table(inv_freq, rows, positions);
        const std::vector<float> q =
            random_floats(rng, static_cast<std::size_t>(n_tokens * q_stride));
        const std::vector<float> k = with_rounding_cases(
            random_floats(rng, static_cast<std::size_t>(n_tokens * kv_row), 3.0f));
        const std::vector<float> v = with_rounding_cases(
            random_floats(rng, static_cast<std::size_t>(n_tokens * kv_row), 3.0f));
        const auto cache_size = static_cast<std::size_t>(kv_heads * capacity * head_dim);
        const std::vector<float> cache_before = random_floats(rng, cache_size);
        DeviceBuffer<std::int32_t> d_positions(positions);
        DeviceBuffer<StepParams> d_step(
            std::vector<StepParams>{{static_cast<std::int32_t>(n_past), 0}});
        RopeKvArgs args;
        args.q_stride = q_stride;
        args.n_q_heads = q_heads;
        args.k_stride = kv_row;
        args.kv_heads = kv_heads;
        args.head_dim = head_dim;
        args.capacity = capacity;
        // Reference: an f32 cache.
        DeviceBuffer<float> q_ref(q), k_ref(k), v_ref(v), kc_ref(cache_before),
            vc_ref(cache_before);
        args.q = with_q ? q_ref.get() : nullptr;
        args.k = k_ref.get();
        args.v = v_ref.get();
        args.kv_dtype = DType::kF32;
        rope_write_kv(args, n_tokens, d_positions.get(), d_table.get(), rows, d_step.get(),
                      kc_ref.get(), vc_ref.get(), nullptr);
        // A bf16 cache.
        DeviceBuffer<float> q_b(q), k_b(k), v_b(v);
        DeviceBuffer<std::uint16_t> kc_b(to_bf16(cache_before)), vc_b(to_bf16(cache_before));
        args.q = with_q ? q_b.get() : nullptr;
        args.k = k_b.get();
        args.v = v_b.get();
        args.kv_dtype = DType::kBF16;
        rope_write_kv(args, n_tokens, d_positions.get(), d_table.get(), rows, d_step.get(),
                      kc_b.get(), vc_b.get(), nullptr);
        EXPECT_TRUE(same_bits(q_b.download(), q_ref.download())) << "q";
        EXPECT_TRUE(same_bits(k_b.download(), k_ref.download())) << "k";
        EXPECT_TRUE(same_bits(v_b.download(), v)) << "v is read only";
        const std::vector<float> v_expected = vc_ref.download();
        const auto first = static_cast<std::size_t>(n_past * head_dim);
        EXPECT_EQ(std::bit_cast<std::uint32_t>(v_expected[first]), kBf16RoundingBits[0])
            << "the f32 cache holds v unchanged";
        expect_bf16_of(kc_b.download(), kc_ref.download(), "key cache");
        expect_bf16_of(vc_b.download(), v_expected, "value cache");
      }
    }
  }
}

// A token whose position is outside the RoPE table (at its end, past it, or negative) is left as
// it is: rope does not rotate its row, and rope_write_kv neither rotates its q and k rows nor
// writes its K/V cache slot, which keeps its previous contents (in an f32 and a bf16 cache). The
// other tokens of the same launch are rotated with apply_rope's bits and written as usual.
TEST(CudaRope, PositionsOutsideTheTableAreLeftAlone) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(19);
  constexpr std::int64_t kTablePositions = 40;
  const std::vector<std::int32_t> positions = {5, 40, 0, 41, 39, 100000, -1, 12};
  const auto n_tokens = static_cast<std::int64_t>(positions.size());
  const auto in_table = [&](std::int64_t t) {
    const std::int32_t p = positions[static_cast<std::size_t>(t)];
    return p >= 0 && p < kTablePositions;
  };
  DeviceBuffer<std::int32_t> d_positions(positions);
  for (const std::int64_t head_dim : {std::int64_t{8}, std::int64_t{128}}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim);
    const std::vector<float> inv_freq = llama_inv_freq(head_dim, 10000.0);
    std::vector<float> table(static_cast<std::size_t>(kTablePositions * head_dim));
    cpu::fill_rope_table(inv_freq, 0, kTablePositions, table.data());
    const DeviceBuffer<float> d_table(table);
    // x with the rows of the tokens inside the table rotated by the CPU reference, one at a time.
    const auto rotated_inside = [&](std::vector<float> x, std::int64_t row_stride,
                                    std::int64_t n_heads) {
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        if (!in_table(t)) continue;
        cpu::apply_rope(x.data() + t * row_stride, 1, row_stride, n_heads, head_dim,
                        positions.data() + t, inv_freq);
      }
      return x;
    };

    {  // rope
      SCOPED_TRACE("rope");
      const std::int64_t n_heads = 3;
      const std::int64_t row_stride = n_heads * head_dim + 5;
      const std::vector<float> x =
          random_floats(rng, static_cast<std::size_t>(n_tokens * row_stride), 2);
      DeviceBuffer<float> d_x(x);
      rope(d_x.get(), n_tokens, row_stride, n_heads, head_dim, d_positions.get(), d_table.get(),
           kTablePositions, nullptr);
      const std::vector<float> actual = d_x.download();
      EXPECT_TRUE(same_bits(actual, rotated_inside(x, row_stride, n_heads)));
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        if (in_table(t)) continue;
        const auto begin = static_cast<std::size_t>(t * row_stride);
        const std::vector<float> row_after(
            actual.begin() + static_cast<std::ptrdiff_t>(begin),
            actual.begin() + static_cast<std::ptrdiff_t>(begin + row_stride));
        const std::vector<float> row_before(
            x.begin() + static_cast<std::ptrdiff_t>(begin),
            x.begin() + static_cast<std::ptrdiff_t>(begin + row_stride));
        EXPECT_TRUE(same_bits(row_after, row_before))
            << "token " << t << " at position " << positions[static_cast<std::size_t>(t)];
      }
    }

    // rope_write_kv
    const std::int64_t q_heads = 4;
    const std::int64_t kv_heads = 2;
    const std::int64_t capacity = 16;
    const std::int64_t n_past = 3;
    const std::int64_t q_stride = q_heads * head_dim;
    const std::int64_t kv_row = kv_heads * head_dim;
    const std::vector<float> q = random_floats(rng, static_cast<std::size_t>(n_tokens * q_stride));
    const std::vector<float> k = random_floats(rng, static_cast<std::size_t>(n_tokens * kv_row));
    const std::vector<float> v = random_floats(rng, static_cast<std::size_t>(n_tokens * kv_row));
    const auto cache_size = static_cast<std::size_t>(kv_heads * capacity * head_dim);
    const std::vector<float> k_cache_before = random_floats(rng, cache_size);
    const std::vector<float> v_cache_before = random_floats(rng, cache_size);
    const std::vector<float> q_expected = rotated_inside(q, q_stride, q_heads);
    const std::vector<float> k_expected = rotated_inside(k, kv_row, kv_heads);
    // The caches as they were, but for the slots n_past + t of the tokens inside the table.
    std::vector<float> k_cache_expected = k_cache_before;
    std::vector<float> v_cache_expected = v_cache_before;
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      if (!in_table(t)) continue;
      for (std::int64_t h = 0; h < kv_heads; ++h) {
        for (std::int64_t d = 0; d < head_dim; ++d) {
          const auto src = static_cast<std::size_t>(t * kv_row + h * head_dim + d);
          const auto dst = static_cast<std::size_t>((h * capacity + n_past + t) * head_dim + d);
          k_cache_expected[dst] = k_expected[src];
          v_cache_expected[dst] = v[src];
        }
      }
    }
    DeviceBuffer<StepParams> d_step(
        std::vector<StepParams>{{static_cast<std::int32_t>(n_past), 0}});
    RopeKvArgs args;
    args.q_stride = q_stride;
    args.n_q_heads = q_heads;
    args.k_stride = kv_row;
    args.kv_heads = kv_heads;
    args.head_dim = head_dim;
    args.capacity = capacity;
    {
      SCOPED_TRACE("rope_write_kv, f32 cache");
      DeviceBuffer<float> d_q(q), d_k(k), d_v(v), d_kc(k_cache_before), d_vc(v_cache_before);
      args.q = d_q.get();
      args.k = d_k.get();
      args.v = d_v.get();
      args.kv_dtype = DType::kF32;
      rope_write_kv(args, n_tokens, d_positions.get(), d_table.get(), kTablePositions, d_step.get(),
                    d_kc.get(), d_vc.get(), nullptr);
      EXPECT_TRUE(same_bits(d_q.download(), q_expected)) << "q";
      EXPECT_TRUE(same_bits(d_k.download(), k_expected)) << "k";
      EXPECT_TRUE(same_bits(d_kc.download(), k_cache_expected)) << "key cache";
      EXPECT_TRUE(same_bits(d_vc.download(), v_cache_expected)) << "value cache";
    }
    {
      SCOPED_TRACE("rope_write_kv, bf16 cache");
      DeviceBuffer<float> d_q(q), d_k(k), d_v(v);
      DeviceBuffer<std::uint16_t> d_kc(to_bf16(k_cache_before)), d_vc(to_bf16(v_cache_before));
      args.q = d_q.get();
      args.k = d_k.get();
      args.v = d_v.get();
      args.kv_dtype = DType::kBF16;
      rope_write_kv(args, n_tokens, d_positions.get(), d_table.get(), kTablePositions, d_step.get(),
                    d_kc.get(), d_vc.get(), nullptr);
      EXPECT_TRUE(same_bits(d_q.download(), q_expected)) << "q";
      EXPECT_TRUE(same_bits(d_k.download(), k_expected)) << "k";
      expect_bf16_of(d_kc.download(), k_cache_expected, "key cache");
      expect_bf16_of(d_vc.download(), v_cache_expected, "value cache");
    }
  }
}

TEST(CudaGatherRows, CopiesTheListedRows) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(8);
  const std::int64_t dim = 333;
  const std::vector<float> src = random_floats(rng, static_cast<std::size_t>(10 * dim));
  const std::vector<std::int32_t> rows = {9, 0, 4, 4, 7};
  DeviceBuffer<float> d_src(src);
  DeviceBuffer<std::int32_t> d_rows(rows);
  DeviceBuffer<float> d_dst(rows.size() * static_cast<std::size_t>(dim));
  d_dst.poison();
  gather_rows(d_src.get(), d_rows.get(), static_cast<std::int64_t>(rows.size()), dim, d_dst.get(),
              nullptr);
  std::vector<float> expected;
  for (const std::int32_t r : rows) {
    expected.insert(expected.end(), src.begin() + r * dim, src.begin() + (r + 1) * dim);
  }
  EXPECT_TRUE(same_bits(d_dst.download(), expected));
}

TEST(CudaConvertActivations, RoundsToNearestEvenLikeTheCpu) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(9);
  std::vector<float> x = random_floats(rng, 10007, 4);
  // Magnitudes across the f16 range, subnormals and rounding ties included.
  x[1] = 1e-6f;
  x[2] = -3e-8f;
  x[3] = 60000.0f;
  x[4] = 1.0f + 1.0f / 2048.0f;  // f16 tie
  x[5] = 1.0f + 1.0f / 256.0f;   // bf16 tie
  x[6] = -0.0f;
  DeviceBuffer<float> d_x(x);
  for (const DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    DeviceBuffer<std::uint16_t> d_out(x.size());
    d_out.poison();
    convert_activations(d_x.get(), dtype, d_out.get(), static_cast<std::int64_t>(x.size()),
                        nullptr);
    const std::vector<std::uint16_t> actual = d_out.download();
    int failures = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::uint16_t expected = dtype == DType::kBF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
      if (actual[i] != expected && ++failures <= 5) {
        ADD_FAILURE() << "element " << i << " (" << x[i] << "): " << actual[i] << " vs "
                      << expected;
      }
    }
    EXPECT_EQ(failures, 0);
  }
  // f32 -> f32 is a copy.
  DeviceBuffer<float> d_copy(x.size());
  d_copy.poison();
  convert_activations(d_x.get(), DType::kF32, d_copy.get(), static_cast<std::int64_t>(x.size()),
                      nullptr);
  EXPECT_TRUE(same_bits(d_copy.download(), x));
}

TEST(CudaDevice, CountIsPositiveWithADevice) {
  SELFSPEC_REQUIRE_GPU();
  EXPECT_GT(device_count(), 0);
}

}  // namespace
}  // namespace selfspec::kernels::cuda::test
