// Microbenchmark of the packed-weight matmuls (bf16 with vdpbf16ps, and every quantized format
// with vpdpbusd): per format and token count T, the time of one matmul whose weights come from
// DRAM (each call uses the next of several copies, together far beyond the last-level cache), as
//   GB/s    packed weight bytes / time (the stream the kernel reads),
//   GMAC/s  T x rows x cols / time,
//   v       time(T) / time(1): what verifying T - 1 drafted tokens costs against one decode step
// and, once, the machine's streaming read bandwidth measured the same way (stream_read over a
// buffer of the pool's size), so GB/s can be read as a fraction of it.
//
// Ratios are measured side by side: every repetition runs every T of a format back to back, and
// each figure is the median over repetitions. Default shape 8960 x 1536 (Qwen2.5-1.5B's MLP
// gate/up). Output: a table on stdout and, with --json FILE, one JSON object.
//
//   packed_matmul_bench [--formats bf16,q4_k,q6_k,q8_0,q4_1,q4_0,q5_0] [--tokens 1,2,...]
//                       [--rows 8960] [--cols 1536] [--threads N] [--reps 7] [--pool-mb 768]
//                       [--isa avx512|avx2|scalar] [--json FILE]
#include "core/aligned_buffer.hpp"
#include "core/dtype.hpp"
#include "core/parallel.hpp"
#include "core/weight_format.hpp"
#include "kernels/cpu/bf16_matmul.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"
#include "kernels/cpu/memory_stream.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/quant_matmul.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace selfspec::kernels::cpu {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> formats = {"bf16", "q4_k", "q6_k", "q8_0", "q4_1", "q4_0", "q5_0"};
  std::vector<std::int64_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 64};
  std::int64_t rows = 8960;
  std::int64_t cols = 1536;
  int threads = 0;
  int reps = 7;
  std::int64_t pool_mb = 768;
  std::string isa;
  std::string json;
};

WeightFormat parse_format(const std::string& name) {
  for (const WeightFormat f : {WeightFormat::kBF16, WeightFormat::kQ4_0, WeightFormat::kQ4_1,
                               WeightFormat::kQ5_0, WeightFormat::kQ5_1, WeightFormat::kQ8_0,
                               WeightFormat::kQ4_K, WeightFormat::kQ5_K, WeightFormat::kQ6_K}) {
    if (weight_format_name(f) == name) return f;
  }
  throw CLI::ValidationError("--formats", "unknown format '" + name + "'");
}

// One packed matrix of random values (speed does not depend on them; scales are kept finite).
std::vector<std::byte> random_packed(WeightFormat format, std::int64_t rows, std::int64_t cols) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  if (format == WeightFormat::kBF16) {
    std::vector<std::uint16_t> values(static_cast<std::size_t>(rows * cols));
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (std::uint16_t& v : values) v = f32_to_bf16(normal(rng));
    std::vector<std::byte> out(static_cast<std::size_t>(packed_bf16_bytes(rows, cols)));
    pack_bf16_rows(values.data(), rows, cols, cols, out);
    return out;
  }
  const GgmlType type = ggml_type_of(format);
  const std::int64_t block_bytes = ggml_block_bytes(type);
  const std::int64_t row_bytes = cols / ggml_block_elements(type) * block_bytes;
  std::vector<std::byte> blocks(static_cast<std::size_t>(rows * row_bytes));
  for (std::byte& b : blocks) b = static_cast<std::byte>(byte(rng));
  // Every f16 field that is a scale gets a small finite value.
  const std::uint16_t scale = f32_to_f16(0.01f);
  const std::vector<int> fields = format == WeightFormat::kQ6_K ? std::vector<int>{208}
                                  : (format == WeightFormat::kQ4_0 ||
                                     format == WeightFormat::kQ5_0 || format == WeightFormat::kQ8_0)
                                      ? std::vector<int>{0}
                                      : std::vector<int>{0, 2};
  for (std::size_t b = 0; b < blocks.size(); b += static_cast<std::size_t>(block_bytes)) {
    for (const int f : fields) std::memcpy(blocks.data() + b + f, &scale, sizeof scale);
  }
  std::vector<std::byte> out(static_cast<std::size_t>(packed_quant_bytes(format, rows, cols, 0)));
  pack_quant_rows({format, blocks.data(), rows, row_bytes, 0, cols}, out);
  return out;
}

struct Pool {
  WeightFormat format;
  std::int64_t rows;
  std::int64_t cols;
  std::size_t matrix_bytes;
  std::size_t stride;
  std::size_t copies;
  AlignedBuffer<std::byte> data;
  PackedView view(std::size_t i) const {
    return {format, data.data() + (i % copies) * stride, rows, cols};
  }
};

Pool make_pool(WeightFormat format, const Options& o) {
  const std::vector<std::byte> one = random_packed(format, o.rows, o.cols);
  Pool pool{format, o.rows, o.cols, one.size(), (one.size() + 4095) / 4096 * 4096, 0, {}};
  pool.copies = std::max<std::size_t>(
      2, static_cast<std::size_t>(o.pool_mb) * (std::size_t{1} << 20) / pool.stride);
  pool.data.resize(pool.stride * pool.copies);
  for (std::size_t c = 0; c < pool.copies; ++c) {
    std::memcpy(pool.data.data() + c * pool.stride, one.data(), one.size());
  }
  return pool;
}

void run_matmul(const Pool& pool, const float* x, std::int64_t tokens, std::size_t copy, float* y) {
  if (pool.format == WeightFormat::kBF16) {
    bf16_matmul(x, tokens, pool.view(copy), y);
  } else {
    quant_matmul(x, tokens, pool.view(copy), y);
  }
}

// Seconds per call: enough calls to pass ~0.15 s, over fresh copies of the weights.
double time_per_call(const Pool& pool, const std::vector<float>& x, std::int64_t tokens,
                     std::vector<float>& y, std::size_t& next) {
  const std::size_t calls = std::max<std::size_t>(pool.copies, 8);
  const auto start = Clock::now();
  for (std::size_t i = 0; i < calls; ++i) run_matmul(pool, x.data(), tokens, next++, y.data());
  return std::chrono::duration<double>(Clock::now() - start).count() / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double stream_gbps(std::int64_t bytes, int reps) {
  const std::int64_t n = bytes / 4;
  AlignedBuffer<float> buffer(static_cast<std::size_t>(n));
  std::fill(buffer.data(), buffer.data() + n, 1.0f);
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    volatile float sink = stream_read(buffer.data(), n);
    (void)sink;
    rates.push_back(static_cast<double>(bytes) /
                    std::chrono::duration<double>(Clock::now() - start).count() / 1e9);
  }
  return median(rates);
}

int run(const Options& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  if (o.isa == "avx512") force_isa(Isa::kAvx512);
  if (o.isa == "avx2") force_isa(Isa::kAvx2);
  if (o.isa == "scalar") force_isa(Isa::kScalar);
  const std::int64_t max_tokens = *std::max_element(o.tokens.begin(), o.tokens.end());
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(max_tokens * o.cols));
  for (float& v : x) v = normal(rng);
  std::vector<float> y(static_cast<std::size_t>(max_tokens * o.rows));
  const double stream = stream_gbps(o.pool_mb << 20, o.reps);
  fmt::print("isa {}, {} thread(s), matrix {} x {}, pool {} MiB; streaming read {:.1f} GB/s\n",
             isa_name(active_isa()), num_threads(), o.rows, o.cols, o.pool_mb, stream);
  fmt::print("{:<6} {:>4} {:>10} {:>8} {:>8} {:>7} {:>6}\n", "format", "T", "us/call", "GB/s",
             "GMAC/s", "stream", "v");
  nlohmann::json out = {{"isa", isa_name(active_isa())},
                        {"threads", num_threads()},
                        {"rows", o.rows},
                        {"cols", o.cols},
                        {"stream_read_gbps", stream},
                        {"results", nlohmann::json::array()}};
  for (const std::string& name : o.formats) {
    const WeightFormat format = parse_format(name);
    const Pool pool = make_pool(format, o);
    std::size_t next = 0;
    std::map<std::int64_t, std::vector<double>> times;
    (void)time_per_call(pool, x, 1, y, next);  // warm up
    for (int r = 0; r < o.reps; ++r) {
      for (const std::int64_t t : o.tokens) times[t].push_back(time_per_call(pool, x, t, y, next));
    }
    const double base = median(times[1].empty() ? times.begin()->second : times[1]);
    for (const std::int64_t t : o.tokens) {
      const double s = median(times[t]);
      const double gbps = static_cast<double>(pool.matrix_bytes) / s / 1e9;
      const double gmacs = static_cast<double>(t * o.rows * o.cols) / s / 1e9;
      fmt::print("{:<6} {:>4} {:>10.1f} {:>8.2f} {:>8.1f} {:>7.2f} {:>6.3f}\n", name, t, s * 1e6,
                 gbps, gmacs, gbps / stream, s / base);
      out["results"].push_back({{"format", name},
                                {"tokens", t},
                                {"seconds", s},
                                {"weight_bytes", pool.matrix_bytes},
                                {"gbps", gbps},
                                {"gmacs", gmacs},
                                {"fraction_of_stream", gbps / stream},
                                {"v", s / base}});
    }
  }
  if (!o.json.empty()) {
    std::ofstream(o.json) << out.dump(2) << "\n";
    fmt::print("wrote {}\n", o.json);
  }
  return 0;
}

}  // namespace
}  // namespace selfspec::kernels::cpu

int main(int argc, char** argv) {
  selfspec::kernels::cpu::Options o;
  CLI::App app{"packed-weight matmul microbenchmark: GB/s, GMAC/s and v per format and T"};
  app.add_option("--formats", o.formats, "formats (bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, ...)")
      ->delimiter(',');
  app.add_option("--tokens", o.tokens, "token counts T")->delimiter(',');
  app.add_option("--rows", o.rows, "output rows")->check(CLI::PositiveNumber);
  app.add_option("--cols", o.cols, "input columns (a multiple of 256)")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "worker threads (default: all cores)");
  app.add_option("--reps", o.reps, "repetitions (median)")->check(CLI::PositiveNumber);
  app.add_option("--pool-mb", o.pool_mb, "MiB of weight copies rotated through")
      ->check(CLI::PositiveNumber);
  app.add_option("--isa", o.isa, "force an instruction set")
      ->check(CLI::IsMember({"avx512", "avx2", "scalar"}));
  app.add_option("--json", o.json, "write the results as JSON");
  CLI11_PARSE(app, argc, argv);
  try {
    return selfspec::kernels::cpu::run(o);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
