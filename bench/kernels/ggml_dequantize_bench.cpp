// Microbenchmark of ggml dequantization (Google Benchmark), one thread, per type: the fast path
// (dequantize_ggml) and the element-by-element reference it must equal.
//
// Two sizes: "cache" dequantizes 64 Ki elements (256 KiB of f32 output, within L2) again and
// again, the kernel's own throughput; "dram" dequantizes 32 Mi elements (128 MiB of output plus
// the input), the bandwidth-bound case of loading a checkpoint. GB/s counts bytes read (the
// quantized input) plus bytes written (4 per element). The blocks are random bytes with finite
// f16 scales (dequantization speed does not depend on the values).
#include "core/aligned_buffer.hpp"
#include "core/dtype.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace selfspec {
namespace {

constexpr std::int64_t kCacheElements = std::int64_t{1} << 16;
constexpr std::int64_t kDramElements = std::int64_t{1} << 25;

// xorshift64: fast enough to fill a few hundred MiB.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 1) {}
  std::uint64_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_;
  }

 private:
  std::uint64_t state_;
};

// Byte offsets of the f16 scale fields in one block (ggml-common.h).
std::vector<std::size_t> scale_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
      return {0};
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return {0, 2};
    case GgmlType::kQ6_K:
      return {208};
    case GgmlType::kQ2_K:
      return {80, 82};
    case GgmlType::kQ3_K:
      return {108};
    default:
      return {};
  }
}

AlignedBuffer<std::byte> random_tensor(GgmlType type, std::int64_t n) {
  const auto bytes = static_cast<std::size_t>(ggml_row_bytes(type, n));
  AlignedBuffer<std::byte> data(bytes);
  Random rng(static_cast<std::uint64_t>(type) + 1);
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t word = rng.next();
    std::memcpy(data.data() + i, &word, 8);
  }
  const auto block_bytes = static_cast<std::size_t>(ggml_block_bytes(type));
  for (std::size_t block = 0; block < bytes / block_bytes; ++block) {
    for (const std::size_t offset : scale_offsets(type)) {
      const float scale = static_cast<float>(rng.next() % 1000 + 1) * 1e-4f;
      const std::uint16_t bits = f32_to_f16(scale);
      std::memcpy(data.data() + block * block_bytes + offset, &bits, sizeof bits);
    }
  }
  return data;
}

void bm_dequantize(benchmark::State& state, GgmlType type, std::int64_t n, bool reference) {
  const AlignedBuffer<std::byte> src = random_tensor(type, n);
  AlignedBuffer<float> dst(static_cast<std::size_t>(n));
  const std::span<const std::byte> in(src.data(), src.size());
  const std::span<float> out(dst.data(), dst.size());
  for (auto _ : state) {
    if (reference) {
      dequantize_ggml_reference(type, in, out);
    } else {
      dequantize_ggml(type, in, out);
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(src.size()) + 4.0 * static_cast<double>(n);
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["Gelem/s"] = benchmark::Counter(static_cast<double>(n) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  struct Size {
    const char* name;
    std::int64_t elements;
  };
  const Size sizes[] = {{"cache", kCacheElements}, {"dram", kDramElements}};
  for (const Size& size : sizes) {
    for (const bool reference : {false, true}) {
      if (reference && size.elements != kCacheElements) continue;  // slow; the cache size says it
      for (const GgmlType type : kSupportedGgmlTypes) {
        const std::string name = std::string("ggml_dequantize/") +
                                 (reference ? "reference/" : "fast/") + size.name + "/" +
                                 std::string(ggml_type_name(type));
        const std::int64_t n = size.elements;
        benchmark::RegisterBenchmark(
            name.c_str(),
            [=](benchmark::State& state) { bm_dequantize(state, type, n, reference); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace
}  // namespace selfspec

int main(int argc, char** argv) {
  selfspec::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
