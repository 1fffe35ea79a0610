// Microbenchmarks of the CPU kernels, for both ISAs (Google Benchmark).
//
// Decode matmuls (T = 1) are memory bound: each iteration uses the next of several copies of the
// weight matrix, the copies together far larger than the last-level cache (SELFSPEC_BENCH_POOL_MB,
// default 768 MiB), so the figure is DRAM bandwidth, reported as GB/s of weights + activations
// moved. Verification batches (T = 2..13, the K + 1 tokens of a self-speculative verification
// forward) use the same pool and report GB/s and GFLOP/s; the prefill matmul (T = 64) is compute
// bound and runs on one cache-resident matrix (GFLOP/s). Decode attention (T = 1 over 1024 / 4096
// cached slots; MHA and GQA shapes; scalar, AVX2 and AVX-512; an f32 and a bf16 cache) rotates over
// K/V cache copies the same way and reports GB/s of K and V read (at their element size) and
// GMAC/s; RoPE on a LLaMA-7B token's q (32 heads of 128) computing cos/sin per call or reading the
// RoPE table, GB/s of the rows read and written plus the table rows read;
// RMSNorm reports GB/s of data read and written (cache resident: a per-token cost); so does the
// scatter of a pruned draft vocabulary's logits into a vocab row (scatter_columns), and the KV
// cache keeping a verified tree's accepted path (compact_rows: GB/s of the rows read and written,
// whole-model caches of a LLaMA-70B TP-8 shard and of SmolLM2-135M).
// Thread count: the default of core/parallel.hpp (all cores available to the process), or
// SELFSPEC_BENCH_THREADS.
#include "core/aligned_buffer.hpp"
#include "core/dtype.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/memory_stream.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/row_compaction.hpp"
#include "kernels/cpu/scatter.hpp"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace selfspec::kernels::cpu {
namespace {

constexpr std::size_t kDefaultPoolBytes = std::size_t{768} << 20;

// Deterministic pseudo-random values in [-1, 1) (xorshift; fast enough to fill large pools).
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 1) {}
  float next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return static_cast<float>(static_cast<std::int64_t>(state_ >> 40) - (1 << 23)) /
           static_cast<float>(1 << 23);
  }

 private:
  std::uint64_t state_;
};

std::vector<float> random_vector(std::size_t n, std::uint64_t seed) {
  Random rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.next();
  return v;
}

std::size_t pool_bytes() {
  if (const char* env = std::getenv("SELFSPEC_BENCH_POOL_MB")) {
    return static_cast<std::size_t>(std::max(1L, std::atol(env))) << 20;
  }
  return kDefaultPoolBytes;
}

// `copies` copies of one random [rows x cols] matrix in the given dtype, back to back.
struct WeightPool {
  DType dtype = DType::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::size_t copies = 0;
  std::size_t matrix_bytes = 0;
  AlignedBuffer<std::uint8_t> data;

  WeightView view(std::size_t i) const {
    return WeightView{dtype, data.data() + (i % copies) * matrix_bytes, rows, cols};
  }
};

// One pool alive at a time (benchmarks run in registration order, grouped by shape).
const WeightPool& weight_pool(DType dtype, std::int64_t rows, std::int64_t cols, bool rotate) {
  static std::unique_ptr<WeightPool> pool;
  const std::size_t matrix_bytes = static_cast<std::size_t>(rows * cols) * dtype_size(dtype);
  const std::size_t copies = rotate ? std::max<std::size_t>(2, pool_bytes() / matrix_bytes) : 1;
  if (pool && pool->dtype == dtype && pool->rows == rows && pool->cols == cols &&
      pool->copies == copies) {
    return *pool;
  }
  pool.reset();
  auto fresh = std::make_unique<WeightPool>();
  fresh->dtype = dtype;
  fresh->rows = rows;
  fresh->cols = cols;
  fresh->copies = copies;
  fresh->matrix_bytes = (matrix_bytes + 63) / 64 * 64;
  fresh->data.resize(fresh->matrix_bytes * copies);
  const std::vector<float> values = random_vector(static_cast<std::size_t>(rows * cols), 42);
  convert_dtype(DType::kF32, values.data(), dtype, fresh->data.data(), values.size());
  for (std::size_t c = 1; c < copies; ++c) {
    std::memcpy(fresh->data.data() + c * fresh->matrix_bytes, fresh->data.data(), matrix_bytes);
  }
  pool = std::move(fresh);
  return *pool;
}

bool select_isa(benchmark::State& state, Isa isa) {
  if (!isa_supported(isa)) {
    state.SkipWithError((std::string("CPU lacks ") + std::string(isa_name(isa))).c_str());
    return false;
  }
  force_isa(isa);
  return true;
}

void bm_matmul(benchmark::State& state, Isa isa, DType dtype, std::int64_t n_tokens,
               std::int64_t rows, std::int64_t cols) {
  if (!select_isa(state, isa)) return;
  // Decode and verification shapes (T <= 16) rotate over a pool larger than the caches: their
  // weights come from DRAM, as in a real forward.
  const bool decode = n_tokens == 1;
  const WeightPool& pool = weight_pool(dtype, rows, cols, n_tokens <= 16);
  const std::vector<float> x = random_vector(static_cast<std::size_t>(n_tokens * cols), 7);
  std::vector<float> y(static_cast<std::size_t>(n_tokens * rows));
  std::size_t next = 0;
  for (auto _ : state) {
    matmul(x.data(), n_tokens, pool.view(next++), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(rows * cols) * static_cast<double>(dtype_size(dtype)) +
                       4.0 * static_cast<double>(n_tokens * (rows + cols));
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  if (!decode) {
    const double flops = 2.0 * static_cast<double>(n_tokens * rows * cols);
    state.counters["GFLOP/s"] =
        benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  }
  state.counters["threads"] = num_threads();
}

void bm_rmsnorm(benchmark::State& state, std::int64_t n_tokens, std::int64_t dim) {
  const std::vector<float> x = random_vector(static_cast<std::size_t>(n_tokens * dim), 1);
  const std::vector<float> w = random_vector(static_cast<std::size_t>(dim), 2);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    rmsnorm(x.data(), w.data(), 1e-5f, n_tokens, dim, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = 4.0 * static_cast<double>(2 * n_tokens * dim + dim);
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// RoPE of n_tokens rows of 32 heads of 128 at positions near 4000: per call (cos/sin in double,
// apply_rope) or from the RoPE table (apply_rope_table). GB/s of x read and written, plus the
// table's rows for the table form.
void bm_rope(benchmark::State& state, std::int64_t n_tokens, bool table) {
  constexpr std::int64_t kHeads = 32;
  constexpr std::int64_t kHeadDim = 128;
  constexpr std::int64_t kPositions = 4096;
  std::vector<float> inv_freq(kHeadDim / 2);
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / kHeadDim));
  }
  std::vector<float> rope_table(static_cast<std::size_t>(kPositions * kHeadDim));
  fill_rope_table(inv_freq, 0, kPositions, rope_table.data());
  std::vector<std::int32_t> positions(static_cast<std::size_t>(n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    positions[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(4000 + t % 96);
  }
  std::vector<float> x = random_vector(static_cast<std::size_t>(n_tokens * kHeads * kHeadDim), 9);
  for (auto _ : state) {
    if (table) {
      apply_rope_table(x.data(), n_tokens, kHeads * kHeadDim, kHeads, kHeadDim, positions.data(),
                       rope_table.data(), kPositions);
    } else {
      apply_rope(x.data(), n_tokens, kHeads * kHeadDim, kHeads, kHeadDim, positions.data(),
                 inv_freq);
    }
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  const double bytes =
      4.0 * static_cast<double>(n_tokens) * (2.0 * kHeads * kHeadDim + (table ? kHeadDim : 0.0));
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

struct AttentionHeads {
  std::int64_t q_heads;
  std::int64_t kv_heads;
  std::int64_t head_dim;
};

void bm_attention(benchmark::State& state, Isa isa, std::int64_t n_slots, AttentionHeads heads,
                  DType kv_dtype) {
  if (!select_isa(state, isa)) return;
  // One new token after n_slots - 1. Each iteration reads the next of several K/V cache copies
  // (together beyond the caches), each in kv_dtype.
  const std::int64_t dim = heads.head_dim;
  const AttentionShape shape{1, heads.q_heads, heads.kv_heads, dim, n_slots - 1, n_slots, kv_dtype};
  const std::size_t cache = static_cast<std::size_t>(shape.n_kv_heads * shape.capacity * dim);
  const std::size_t element = dtype_size(kv_dtype);
  const std::size_t copy_bytes = 2 * cache * element;
  const std::size_t copies = std::max<std::size_t>(2, pool_bytes() / copy_bytes);
  AlignedBuffer<std::byte> pool(copy_bytes * copies);
  const std::vector<float> kv = random_vector(2 * cache, 3);
  for (std::size_t c = 0; c < copies; ++c) {
    for (std::size_t i = 0; i < kv.size(); ++i) {
      store_from_f32(kv_dtype, pool.data() + c * copy_bytes, i, kv[i]);
    }
  }
  const std::vector<float> q = random_vector(static_cast<std::size_t>(shape.n_q_heads * dim), 5);
  std::vector<float> out(q.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  std::size_t next = 0;
  for (auto _ : state) {
    const std::byte* k = pool.data() + (next++ % copies) * copy_bytes;
    attention(q.data(), k, k + cache * element, shape, nullptr, scale, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double bytes = 2.0 * static_cast<double>(element) * static_cast<double>(cache);
  const double macs = 2.0 * static_cast<double>(heads.q_heads * n_slots * dim);
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GMAC/s"] =
      benchmark::Counter(macs / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// A draft row of V' kept logits scattered into a vocab row of `width` (-inf elsewhere): GB/s of
// the row written plus the values and ids read.
void bm_scatter(benchmark::State& state, std::int64_t width, std::int64_t n_ids) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n_ids));
  for (std::int64_t j = 0; j < n_ids; ++j) {
    ids[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(j * (width / n_ids));
  }
  const std::vector<float> values = random_vector(static_cast<std::size_t>(n_ids), 7);
  std::vector<float> out(static_cast<std::size_t>(width));
  for (auto _ : state) {
    scatter_columns(values.data(), 1, ids.data(), n_ids, width,
                    -std::numeric_limits<float>::infinity(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double bytes = 4.0 * static_cast<double>(width + 2 * n_ids);
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// A whole model's KV cache of `capacity` slots ([layer][K, V][kv_head] blocks of
// [capacity][head_dim]) keeping an 8-node accepted path of a tree verified after slot 1000: every
// row moves. GB/s of the rows read and written (2 x blocks x 8 rows x head_dim floats); the rows
// stay cache resident from one iteration to the next, as they are after the verification forward
// that wrote them.
void bm_compact_rows(benchmark::State& state, std::int64_t layers, std::int64_t kv_heads,
                     std::int64_t head_dim) {
  constexpr std::int64_t kCapacity = 2048;
  constexpr std::int64_t kTo = 1001;  // the first tree slot
  const std::vector<std::int32_t> from = {kTo + 1,  kTo + 3,  kTo + 6,  kTo + 10,
                                          kTo + 15, kTo + 21, kTo + 28, kTo + 36};
  const std::int64_t blocks = layers * 2 * kv_heads;
  AlignedBuffer<float> cache(static_cast<std::size_t>(blocks * kCapacity * head_dim));
  std::fill(cache.data(), cache.data() + cache.size(), 1.0f);  // fault every page in first
  for (auto _ : state) {
    constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));  // compact_rows takes bytes
    compact_rows(cache.data(), blocks, kCapacity * head_dim * kFloat, kCapacity, head_dim * kFloat,
                 from, kTo);
    benchmark::DoNotOptimize(cache.data());
    benchmark::ClobberMemory();
  }
  const double bytes = 2.0 * static_cast<double>(blocks) * static_cast<double>(from.size()) *
                       static_cast<double>(head_dim) * sizeof(float);
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// The machine's streaming read and copy bandwidth over a buffer far beyond the caches: the peak
// the decode matmul figures above are to be compared with.
void bm_stream(benchmark::State& state, Isa isa, bool copy) {
  if (!select_isa(state, isa)) return;
  const auto n = static_cast<std::int64_t>(pool_bytes() / sizeof(float) / 2);
  AlignedBuffer<float> src(static_cast<std::size_t>(n));
  AlignedBuffer<float> dst(static_cast<std::size_t>(n));
  const std::vector<float> fill = random_vector(4096, 9);
  for (std::int64_t i = 0; i < n; ++i)
    src[static_cast<std::size_t>(i)] = fill[static_cast<std::size_t>(i % 4096)];
  for (auto _ : state) {
    if (copy) {
      stream_copy(src.data(), dst.data(), n);
      benchmark::DoNotOptimize(dst.data());
    } else {
      benchmark::DoNotOptimize(stream_read(src.data(), n));
    }
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(n) * sizeof(float) * (copy ? 2.0 : 1.0);
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  const Isa isas[] = {Isa::kScalar, Isa::kAvx2};
  struct Shape {
    std::int64_t rows;
    std::int64_t cols;
  };
  for (const Isa isa : isas) {
    for (const bool copy : {false, true}) {
      const std::string name =
          std::string(copy ? "stream_copy/" : "stream_read/") + std::string(isa_name(isa));
      benchmark::RegisterBenchmark(name.c_str(),
                                   [=](benchmark::State& state) { bm_stream(state, isa, copy); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  const Shape decode_shapes[] = {{4096, 4096}, {11008, 4096}};
  for (const Shape& s : decode_shapes) {
    for (const DType dtype : {DType::kBF16, DType::kF32}) {
      for (const Isa isa : isas) {
        const std::string name = "matmul_decode/" + std::string(isa_name(isa)) + "/" +
                                 std::string(dtype_name(dtype)) + "/T1/" + std::to_string(s.rows) +
                                 "x" + std::to_string(s.cols);
        benchmark::RegisterBenchmark(
            name.c_str(),
            [=](benchmark::State& state) { bm_matmul(state, isa, dtype, 1, s.rows, s.cols); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  // Verification batches of self-speculative decoding (T = K + 1 tokens): weight bound for small
  // T, compute bound beyond. The scalar path only at T = 4, 8 (it is slow and not the target).
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    for (const std::int64_t n_tokens : {2, 3, 4, 5, 8, 13}) {
      for (const Isa isa : isas) {
        if (isa == Isa::kScalar && (dtype != DType::kBF16 || (n_tokens != 4 && n_tokens != 8))) {
          continue;
        }
        const std::string name = "matmul_verify/" + std::string(isa_name(isa)) + "/" +
                                 std::string(dtype_name(dtype)) + "/T" + std::to_string(n_tokens) +
                                 "/4096x4096";
        benchmark::RegisterBenchmark(
            name.c_str(),
            [=](benchmark::State& state) { bm_matmul(state, isa, dtype, n_tokens, 4096, 4096); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    for (const Isa isa : isas) {
      const std::string name = "matmul_prefill/" + std::string(isa_name(isa)) + "/" +
                               std::string(dtype_name(dtype)) + "/T64/4096x4096";
      benchmark::RegisterBenchmark(
          name.c_str(),
          [=](benchmark::State& state) { bm_matmul(state, isa, dtype, 64, 4096, 4096); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const std::int64_t n_tokens : {1, 64}) {
    const std::string name = "rmsnorm/T" + std::to_string(n_tokens) + "/4096";
    benchmark::RegisterBenchmark(
        name.c_str(), [=](benchmark::State& state) { bm_rmsnorm(state, n_tokens, 4096); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  for (const std::int64_t n_tokens : {1, 64}) {
    for (const bool table : {false, true}) {
      const std::string name =
          fmt::format("rope/{}/T{}/32x128", table ? "table" : "per-call", n_tokens);
      benchmark::RegisterBenchmark(
          name.c_str(), [=](benchmark::State& state) { bm_rope(state, n_tokens, table); })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (const std::int64_t n_ids : {4096, 16384}) {
    const std::string name = "scatter_columns/49152/" + std::to_string(n_ids);
    benchmark::RegisterBenchmark(name.c_str(),
                                 [=](benchmark::State& state) { bm_scatter(state, 49152, n_ids); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  struct CacheShape {
    const char* name;
    std::int64_t layers, kv_heads, head_dim;
  };
  for (const CacheShape& c :
       {CacheShape{"llama70b-tp8", 80, 1, 128}, CacheShape{"smollm2-135m", 30, 3, 64}}) {
    const std::string name = "compact_rows/" + std::string(c.name) + "/" +
                             std::to_string(c.layers * 2 * c.kv_heads) + "x" +
                             std::to_string(c.head_dim) + "/n8";
    benchmark::RegisterBenchmark(
        name.c_str(),
        [=](benchmark::State& state) { bm_compact_rows(state, c.layers, c.kv_heads, c.head_dim); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  // Decode attention: LLaMA-7B (32 heads of 128), Qwen2.5-1.5B (12 query heads on 2 KV heads of
  // 128), SmolLM2-135M (9 on 3 of 64); the AVX-512 rung has its own attention kernels.
  const AttentionHeads attention_heads[] = {{32, 32, 128}, {12, 2, 128}, {9, 3, 64}};
  for (const AttentionHeads& heads : attention_heads) {
    for (const std::int64_t slots : {1024, 4096}) {
      for (const Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
        // The f32 cache keeps its old names; a bf16 cache is named so.
        for (const DType kv_dtype : {DType::kF32, DType::kBF16}) {
          const std::string name = fmt::format(
              "attention_decode/{}/T1/slots{}/{}on{}x{}{}", isa_name(isa), slots, heads.q_heads,
              heads.kv_heads, heads.head_dim, kv_dtype == DType::kBF16 ? "/bf16-kv" : "");
          benchmark::RegisterBenchmark(
              name.c_str(),
              [=](benchmark::State& state) { bm_attention(state, isa, slots, heads, kv_dtype); })
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
}

}  // namespace
}  // namespace selfspec::kernels::cpu

int main(int argc, char** argv) {
  if (const char* threads = std::getenv("SELFSPEC_BENCH_THREADS")) {
    selfspec::set_num_threads(std::atoi(threads));
  }
  selfspec::kernels::cpu::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
