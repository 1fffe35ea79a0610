// KvCache::keep_rows on the CUDA backend against the CPU backend, bit for bit over the whole
// cache (moved rows, untouched rows, lengths), for a head_dim on the float4 path and one on the
// float path; a bad slot list throws and leaves the device cache as it was.
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

std::vector<float> contents(Backend& backend, const KvCache& kv) {
  std::vector<float> values(static_cast<std::size_t>(kv.bytes() / sizeof(float)));
  backend.download(values.data(), kv.keys(0), kv.bytes());
  return values;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CudaKvCacheKeepRows, MatchesTheCpuBackendExactly) {
  SELFSPEC_REQUIRE_GPU();
  const std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  const std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (const std::int64_t head_dim : {std::int64_t{128}, std::int64_t{6}}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim);
    KvCache gpu_kv(*gpu, 4, 2, head_dim, 33);
    KvCache cpu_kv(*cpu, 4, 2, head_dim, 33);
    std::vector<float> initial(static_cast<std::size_t>(gpu_kv.bytes() / sizeof(float)));
    for (float& x : initial) x = dist(rng);
    gpu->upload(gpu_kv.keys(0), initial.data(), gpu_kv.bytes());
    cpu->upload(cpu_kv.keys(0), initial.data(), cpu_kv.bytes());
    gpu_kv.extend(20);
    cpu_kv.extend(20);

    const std::vector<std::int32_t> from = {5, 7, 8, 12, 19};
    gpu_kv.keep_rows(*gpu, 5, from);
    cpu_kv.keep_rows(*cpu, 5, from);
    EXPECT_EQ(gpu_kv.length(), 10);
    EXPECT_EQ(cpu_kv.length(), 10);
    const std::vector<float> expected = contents(*cpu, cpu_kv);
    ASSERT_FALSE(same_bits(expected, initial));
    EXPECT_TRUE(same_bits(contents(*gpu, gpu_kv), expected));

    const std::vector<std::int32_t> past_length = {6, 10};
    EXPECT_THROW(gpu_kv.keep_rows(*gpu, 5, past_length), Error);
    EXPECT_EQ(gpu_kv.length(), 10);
    EXPECT_TRUE(same_bits(contents(*gpu, gpu_kv), expected));
  }
}

}  // namespace
}  // namespace selfspec::testing
