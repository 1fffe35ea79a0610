// KvCache::keep_rows on the CUDA backend against the CPU backend, bit for bit over the whole
// cache (moved rows, untouched rows, lengths), for f32 caches with a head_dim on the 16-byte-lane
// path and one on the 4-byte path, and for bf16 caches with head_dims on the 16-, 4- and 2-byte
// paths (rows of 256, 128, 12 and 6 bytes); a bad slot list throws and leaves the device cache as
// it was.
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "model/kv_cache.hpp"
#include "tests/support/gpu.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

namespace selfspec::testing {
namespace {

// The whole cache (every layer's K and V, every slot), as bytes.
std::vector<std::uint8_t> contents(Backend& backend, const KvCache& kv) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(kv.bytes()));
  backend.download(bytes.data(), kv.keys(0), kv.bytes());
  return bytes;
}

// Random values in [-4, 4] in every element of a cache of `dtype` (bf16: rounded), as bytes.
std::vector<std::uint8_t> random_contents(std::mt19937& rng, DType dtype, std::uint64_t bytes) {
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(bytes));
  const std::size_t element = dtype_size(dtype);
  for (std::size_t i = 0; i < out.size() / element; ++i) {
    const float x = dist(rng);
    if (dtype == DType::kBF16) {
      const std::uint16_t bits = f32_to_bf16(x);
      std::memcpy(out.data() + i * element, &bits, element);
    } else {
      std::memcpy(out.data() + i * element, &x, element);
    }
  }
  return out;
}

// The same cache on both backends, the same keep_rows: the same bytes; then a refused keep_rows
// leaves the device cache as it was.
void expect_keep_rows_matches_the_cpu(Backend& gpu, Backend& cpu, DType dtype,
                                      std::int64_t head_dim, std::mt19937& rng) {
  KvCache gpu_kv(gpu, 4, 2, head_dim, 33, dtype);
  KvCache cpu_kv(cpu, 4, 2, head_dim, 33, dtype);
  ASSERT_EQ(gpu_kv.dtype(), dtype);
  ASSERT_EQ(gpu_kv.bytes(), KvCache::bytes_for(4, 2, head_dim, 33, dtype));
  const std::vector<std::uint8_t> initial = random_contents(rng, dtype, gpu_kv.bytes());
  gpu.upload(gpu_kv.keys(0), initial.data(), gpu_kv.bytes());
  cpu.upload(cpu_kv.keys(0), initial.data(), cpu_kv.bytes());
  gpu_kv.extend(20);
  cpu_kv.extend(20);

  const std::vector<std::int32_t> from = {5, 7, 8, 12, 19};
  gpu_kv.keep_rows(gpu, 5, from);
  cpu_kv.keep_rows(cpu, 5, from);
  EXPECT_EQ(gpu_kv.length(), 10);
  EXPECT_EQ(cpu_kv.length(), 10);
  const std::vector<std::uint8_t> expected = contents(cpu, cpu_kv);
  ASSERT_FALSE(expected == initial) << "keep_rows moved nothing";
  EXPECT_TRUE(contents(gpu, gpu_kv) == expected);

  const std::vector<std::int32_t> past_length = {6, 10};
  EXPECT_THROW(gpu_kv.keep_rows(gpu, 5, past_length), Error);
  EXPECT_EQ(gpu_kv.length(), 10);
  EXPECT_TRUE(contents(gpu, gpu_kv) == expected);
}

TEST(CudaKvCacheKeepRows, MatchesTheCpuBackendExactly) {
  SELFSPEC_REQUIRE_GPU();
  const std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  const std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::mt19937 rng(41);
  for (const std::int64_t head_dim : {std::int64_t{128}, std::int64_t{6}}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim);
    expect_keep_rows_matches_the_cpu(*gpu, *cpu, DType::kF32, head_dim, rng);
  }
}

TEST(CudaKvCacheKeepRows, Bf16CacheMatchesTheCpuBackendExactly) {
  SELFSPEC_REQUIRE_GPU();
  const std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  const std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::mt19937 rng(42);
  for (const std::int64_t head_dim :
       {std::int64_t{128}, std::int64_t{64}, std::int64_t{6}, std::int64_t{3}}) {
    SCOPED_TRACE(::testing::Message() << "bf16, head_dim " << head_dim);
    expect_keep_rows_matches_the_cpu(*gpu, *cpu, DType::kBF16, head_dim, rng);
  }
  // A bf16 cache is not readable as f32.
  KvCache kv(*gpu, 1, 1, 8, 4, DType::kBF16);
  EXPECT_THROW(static_cast<void>(kv.f32_keys(0)), Error);
}

}  // namespace
}  // namespace selfspec::testing
