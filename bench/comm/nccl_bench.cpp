// NCCL all-reduce microbenchmark at the message sizes of a tensor-parallel decode step: the
// residual-stream all-reduce of T tokens x hidden elements, hidden in {4096, 8192} (7B / 70B
// class), bf16 and f32, T in {1, 4, 8, 16} (one token, speculative verification batches) and 512
// (a prefill chunk).
//
//   mpirun -np <ranks> build/bin/nccl_bench [--iters 200] [--warmup 20] [--no-graph] [--out f.json]
//
// Each configuration is timed two ways with CUDA events on one stream, through NcclComm:
//   stream: `iters` in-place all-reduces enqueued back to back by the host (the eager path);
//   graph:  the same `iters` all-reduces captured in one CUDA graph and replayed (the decode path
//           with graphs: no per-call host cost).
// The time per all-reduce is the slowest rank's. Bandwidths follow nccl-tests: algbw = bytes /
// time, busbw = algbw * 2(n-1)/n (the per-link traffic of a ring all-reduce, comparable across
// rank counts; 0 on one rank), computed from the graph time when measured.
// Without a GPU (or without CUDA in the build) it says so and exits 0. A build without MPI
// measures one rank (run it directly) and refuses a launch of several tasks.
#include "bench/comm/bench_job.hpp"
#include "comm/communicator.hpp"
#include "comm/launcher_environment.hpp"
#include "comm/mpi_runtime.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/human_units.hpp"
#include "core/process_identity.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <exception>
#include <string>

#if SELFSPEC_HAVE_CUDA
#include "comm/nccl_comm.hpp"
#include "core/cuda_check.hpp"
#include "kernels/cuda/cuda_event.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>
#endif

namespace selfspec {
namespace {

struct Options {
  int iters = 200;
  int warmup = 20;
  bool graph = true;
  std::string out;
};

#if SELFSPEC_HAVE_CUDA

// Empty when a CUDA device is usable, else why not.
std::string gpu_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(status);
  if (count == 0) return "no CUDA device: cudaGetDeviceCount() = 0";
  return {};
}

struct Config {
  int hidden;
  DType dtype;
  int tokens;
  std::size_t count() const {
    return static_cast<std::size_t>(hidden) * static_cast<std::size_t>(tokens);
  }
  std::size_t bytes() const { return count() * dtype_size(dtype); }
};

struct Result {
  Config config;
  double stream_us = 0.0;
  double graph_us = 0.0;  // 0 when not measured
  double algbw_gbps = 0.0;
  double busbw_gbps = 0.0;
};

using Event = kernels::cuda::CudaEvent;

class Bench {
 public:
  Bench(Communicator& bootstrap, NcclComm& comm, const Options& options)
      : bootstrap_(bootstrap), comm_(comm), options_(options) {
    SELFSPEC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~Bench() {
    if (graph_exec_ != nullptr) (void)cudaGraphExecDestroy(graph_exec_);
    if (buffer_ != nullptr) (void)cudaFree(buffer_);
    (void)cudaStreamDestroy(stream_);
  }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  Result run(const Config& config) {
    reserve(config.bytes());
    Result result{config};
    result.stream_us = time_stream(config);
    if (options_.graph) result.graph_us = time_graph(config);
    const double us = options_.graph ? result.graph_us : result.stream_us;
    const double n = comm_.size();
    result.algbw_gbps = static_cast<double>(config.bytes()) / (us * 1e-6) / 1e9;
    result.busbw_gbps = result.algbw_gbps * 2.0 * (n - 1.0) / n;
    return result;
  }

 private:
  void reserve(std::size_t bytes) {
    if (bytes <= capacity_) return;
    if (buffer_ != nullptr) SELFSPEC_CUDA_CHECK(cudaFree(buffer_));
    buffer_ = nullptr;
    SELFSPEC_CUDA_CHECK(cudaMalloc(&buffer_, bytes));
    capacity_ = bytes;
    // Zeros: the sums stay finite however many times they are repeated.
    SELFSPEC_CUDA_CHECK(cudaMemset(buffer_, 0, bytes));
  }

  void enqueue(const Config& config, int times) {
    for (int i = 0; i < times; ++i) {
      comm_.all_reduce_device(buffer_, config.count(), config.dtype, stream_);
    }
  }

  // The slowest rank's microseconds per all-reduce for `times` all-reduces enqueued by `launch`.
  template <typename Launch>
  double time_per_call(int times, Launch&& launch) {
    Event start;
    Event stop;
    comm_.wait(stream_);
    bootstrap_.barrier();
    SELFSPEC_CUDA_CHECK(cudaEventRecord(start.get(), stream_));
    launch();
    SELFSPEC_CUDA_CHECK(cudaEventRecord(stop.get(), stream_));
    comm_.wait(stream_);
    float ms = 0.0f;
    SELFSPEC_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    const double us = static_cast<double>(ms) * 1e3 / times;
    std::vector<std::uint64_t> all(static_cast<std::size_t>(bootstrap_.size()));
    bootstrap_.all_gather_u64(std::bit_cast<std::uint64_t>(us), all);
    double slowest = 0.0;
    for (std::uint64_t bits : all) slowest = std::max(slowest, std::bit_cast<double>(bits));
    return slowest;
  }

  double time_stream(const Config& config) {
    enqueue(config, options_.warmup);
    return time_per_call(options_.iters, [&] { enqueue(config, options_.iters); });
  }

  double time_graph(const Config& config) {
    if (graph_exec_ != nullptr) SELFSPEC_CUDA_CHECK(cudaGraphExecDestroy(graph_exec_));
    graph_exec_ = nullptr;
    comm_.wait(stream_);
    cudaGraph_t graph = nullptr;
    SELFSPEC_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue(config, options_.iters);
    } catch (...) {
      (void)cudaStreamEndCapture(stream_, &graph);
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      throw;
    }
    SELFSPEC_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    const cudaError_t instantiated = cudaGraphInstantiate(&graph_exec_, graph, 0);
    (void)cudaGraphDestroy(graph);
    SELFSPEC_CUDA_CHECK(instantiated);
    SELFSPEC_CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream_));  // warm-up replay
    return time_per_call(options_.iters,
                         [&] { SELFSPEC_CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream_)); });
  }

  Communicator& bootstrap_;
  NcclComm& comm_;
  Options options_;
  cudaStream_t stream_ = nullptr;
  void* buffer_ = nullptr;
  std::size_t capacity_ = 0;
  cudaGraphExec_t graph_exec_ = nullptr;
};

// Everything that needs MPI and NCCL; its exceptions reach run() after NcclComm has been
// aborted (it is destroyed during unwinding) and while MPI is still up.
int measure(const Options& options) {
  const std::unique_ptr<Communicator> bootstrap = make_world_communicator();
  int device_count = 0;
  SELFSPEC_CUDA_CHECK(cudaGetDeviceCount(&device_count));
  const int device = process_identity().local_rank % device_count;
  NcclComm comm(*bootstrap, device);

  cudaDeviceProp properties{};
  SELFSPEC_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  int nccl_version = 0;
  if (ncclGetVersion(&nccl_version) != ncclSuccess) nccl_version = 0;
  if (comm.is_root()) {
    fmt::print("NCCL all-reduce, {} rank(s), {} (NCCL {}), {} iterations{}\n", comm.size(),
               properties.name, nccl_version, options.iters,
               options.graph ? ", time per call: stream | graph" : "");
    fmt::print("{:>6} {:>5} {:>6} {:>10} {:>11} {:>11} {:>12} {:>12}\n", "hidden", "dtype",
               "tokens", "size", "stream_us", "graph_us", "algbw_GB/s", "busbw_GB/s");
  }

  Bench bench(*bootstrap, comm, options);
  std::vector<Result> results;
  for (int hidden : {4096, 8192}) {
    for (DType dtype : {DType::kBF16, DType::kF32}) {
      for (int tokens : {1, 4, 8, 16, 512}) {
        const Result r = bench.run(Config{hidden, dtype, tokens});
        results.push_back(r);
        if (comm.is_root()) {
          fmt::print("{:>6} {:>5} {:>6} {:>10} {:>11.2f} {:>11} {:>12.2f} {:>12.2f}\n", hidden,
                     dtype_name(dtype), tokens, message_bytes(r.config.bytes()), r.stream_us,
                     options.graph ? fmt::format("{:.2f}", r.graph_us) : std::string("-"),
                     r.algbw_gbps, r.busbw_gbps);
        }
      }
    }
  }
  if (comm.is_root() && comm.size() == 1) {
    fmt::print("(one rank: busbw is 0 by definition; run under mpirun -np <tp>)\n");
  }

  if (comm.is_root() && !options.out.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Result& r : results) {
      rows.push_back({{"hidden", r.config.hidden},
                      {"dtype", dtype_name(r.config.dtype)},
                      {"tokens", r.config.tokens},
                      {"count", r.config.count()},
                      {"bytes", r.config.bytes()},
                      {"stream_us", r.stream_us},
                      {"graph_us", options.graph ? nlohmann::json(r.graph_us) : nlohmann::json()},
                      {"algbw_gbps", r.algbw_gbps},
                      {"busbw_gbps", r.busbw_gbps}});
    }
    const nlohmann::json document = {{"benchmark", "nccl_all_reduce"},
                                     {"ranks", comm.size()},
                                     {"device", properties.name},
                                     {"nccl_version", nccl_version},
                                     {"iters", options.iters},
                                     {"warmup", options.warmup},
                                     {"bandwidth_from", options.graph ? "graph" : "stream"},
                                     {"results", rows}};
    std::ofstream file(options.out);
    SELFSPEC_CHECK(file.good(), "cannot write {}", options.out);
    file << document.dump(2) << '\n';
    SELFSPEC_CHECK(file.good(), "error writing {}", options.out);
    fmt::print("wrote {}\n", options.out);
  }
  return 0;
}

int run(const Options& options) {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) {
    fmt::print(
        "nccl_bench: {}; nothing to measure (run it on a GPU node, under mpirun for "
        "several ranks)\n",
        reason);
    return 0;
  }
  return run_bench_job("nccl_bench", [&] { return measure(options); });
}

#else  // SELFSPEC_HAVE_CUDA

int run(const Options& /*options*/) {
  fmt::print(
      "nccl_bench: selfspec was built without CUDA (SELFSPEC_CUDA=OFF or no nvcc); "
      "nothing to measure\n");
  return 0;
}

#endif  // SELFSPEC_HAVE_CUDA

}  // namespace
}  // namespace selfspec

int main(int argc, char** argv) {
  selfspec::Options options;
  CLI::App app{"NCCL all-reduce latency and bus bandwidth at decode-step message sizes"};
  app.add_option("--iters", options.iters, "timed all-reduces per configuration")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", options.warmup, "untimed all-reduces before each configuration")
      ->check(CLI::Range(0, 1000000));
  bool no_graph = false;
  app.add_flag("--no-graph", no_graph, "do not time the CUDA-graph replay");
  app.add_option("--out", options.out, "write the results as JSON to this file (rank 0)");
  CLI11_PARSE(app, argc, argv);
  options.graph = !no_graph;
  try {
    return selfspec::run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "nccl_bench error: %s\n", error.what());
    return 1;
  }
}
