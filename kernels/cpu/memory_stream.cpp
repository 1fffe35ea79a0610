#include "kernels/cpu/memory_stream.hpp"

#include "core/parallel.hpp"
#include "kernels/cpu/cpu_features.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#define SELFSPEC_AVX2 __attribute__((target("avx2,fma")))

namespace selfspec::kernels::cpu {
namespace {

constexpr std::int64_t kGrain = 1 << 16;  // floats per parallel chunk boundary (256 KiB)

SELFSPEC_AVX2 float read_avx2(const float* data, std::int64_t n) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    // 2 KiB ahead; address arithmetic only, so prefetching past the end cannot fault.
    const std::uintptr_t ahead = reinterpret_cast<std::uintptr_t>(data + i) + 2048;
    for (std::uintptr_t line = 0; line < 256; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + line), _MM_HINT_T0);
    }
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(data + i + 8 * j));
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += data[i];
  for (int j = 1; j < 8; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  for (float v : lanes) tail += v;
  return tail;
}

float read_scalar(const float* data, std::int64_t n) {
  float a = 0.0f, b = 0.0f, c = 0.0f, d = 0.0f;
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += data[i];
    b += data[i + 1];
    c += data[i + 2];
    d += data[i + 3];
  }
  for (; i < n; ++i) a += data[i];
  return a + b + c + d;
}

}  // namespace

float stream_read(const float* data, std::int64_t n) {
  const bool avx2 = active_isa() >= Isa::kAvx2;
  std::atomic<float> total{0.0f};
  parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    const float part =
        avx2 ? read_avx2(data + begin, end - begin) : read_scalar(data + begin, end - begin);
    float expected = total.load();
    while (!total.compare_exchange_weak(expected, expected + part)) {
    }
  });
  return total.load();
}

void stream_copy(const float* src, float* dst, std::int64_t n) {
  parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    std::memcpy(dst + begin, src + begin, static_cast<std::size_t>(end - begin) * sizeof(float));
  });
}

}  // namespace selfspec::kernels::cpu
