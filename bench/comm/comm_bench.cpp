// Collective latency at the message sizes of a tensor-parallel decode step, over the host
// communicator the CPU backend uses (MpiComm: Open MPI shared memory within a node, TCP or a
// fabric between nodes), and each rank's memory bandwidth. It writes a comm table, the input of
// `selfspec plan --comm-table` (format: comm/comm_table.hpp, configs/comm/README.md).
//
//   mpirun -np <ranks> build/bin/comm_bench [--iters 200] [--warmup 20]
//       [--hidden 576,1536,4096,8192] [--tokens 1,2,4,8,16] [--vocab 32000]
//       [--transport tcp-netns-netem-500us] [--no-memory] [--out table.json]
//
// What it times, through the Communicator interface (comm/communicator.hpp), per message size:
//   all_reduce  T x hidden floats: the residual all-reduces of LlamaModel::forward (f32 on every
//               backend), hidden in --hidden, T in --tokens (1: a decode or draft step, K + 1: a
//               verification);
//   broadcast   8 B .. 64 KiB: the ControlMessage rank 0 sends after every step (352 B) and the
//               drafters' small decisions;
//   gather      per rank 6T floats (T ShardStats records of 24 B: --logits local) and
//               T x vocab/ranks floats (whole logit rows: --logits gather);
//   all_gather  the same per-rank sizes (the device path exchanges them by all-gather).
// Each size: `warmup` untimed calls, then `iters` calls each after a barrier, timed on every rank
// from the barrier's end to the call's; an iteration's time is the slowest rank's (as nccl_bench
// reports), and the table keeps the median and the 90th percentile over iterations. Per op, the
// least-squares Hockney fit t = α + bytes/β (comm/latency_fit.hpp) gives latency_s and
// bandwidth_bytes_per_s. Memory bandwidth: backend/memory_bandwidth.hpp (read kernel, per rank,
// all ranks at once), unless --no-memory. "nodes" counts the distinct host names of the ranks.
// Progress goes to stderr, the summary to stdout (rank 0), the table to --out (rank 0).
// A build without MPI measures one rank (run it directly) and refuses a launch of several tasks.
#include "backend/memory_bandwidth.hpp"
#include "bench/comm/bench_job.hpp"
#include "comm/comm_table.hpp"
#include "comm/communicator.hpp"
#include "comm/launcher_environment.hpp"
#include "comm/mpi_runtime.hpp"
#include "core/error.hpp"
#include "core/human_units.hpp"
#include "core/process_identity.hpp"
#include "core/text_file_output.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace selfspec {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int iters = 200;
  int warmup = 20;
  std::vector<int> hidden = {576, 1536, 4096, 8192};
  std::vector<int> tokens = {1, 2, 4, 8, 16};
  int vocab = 32000;
  std::string transport = "unknown";
  bool memory = true;
  std::string out;
};

// One timed collective call on this rank's buffers (every rank calls it with the same size).
using Call = std::function<void()>;

// The slowest rank's seconds for each of `iters` calls of `call`, after `warmup` untimed ones.
std::vector<double> slowest_times(Communicator& comm, const Options& options, const Call& call) {
  for (int i = 0; i < options.warmup; ++i) call();
  std::vector<float> mine(static_cast<std::size_t>(options.iters));
  for (float& seconds : mine) {
    comm.barrier();
    const auto start = Clock::now();
    call();
    seconds = std::chrono::duration<float>(Clock::now() - start).count();
  }
  const auto ranks = static_cast<std::size_t>(comm.size());
  std::vector<float> all(mine.size() * ranks);
  const std::vector<std::int64_t> counts(ranks, static_cast<std::int64_t>(mine.size()));
  comm.all_gather(mine, all, counts);
  std::vector<double> slowest(mine.size(), 0.0);
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t i = 0; i < mine.size(); ++i)
      slowest[i] = std::max(slowest[i], static_cast<double>(all[r * mine.size() + i]));
  }
  return slowest;
}

// The q-quantile (nearest rank) of `values`.
double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

CollectivePoint measure_point(Communicator& comm, const Options& options, double bytes,
                              const Call& call) {
  const std::vector<double> times = slowest_times(comm, options, call);
  // Whole nanoseconds: the per-call times are single-precision (the all-gather of them).
  const auto ns = [](double seconds) { return std::round(seconds * 1e9) / 1e9; };
  return {bytes, ns(quantile(times, 0.5)), ns(quantile(times, 0.9))};
}

void progress(const Communicator& comm, std::string_view op, double bytes, std::size_t index,
              std::size_t total) {
  if (!comm.is_root()) return;
  fmt::print(stderr, "comm_bench: {} {} ({}/{})\n", op,
             message_bytes(static_cast<std::uint64_t>(bytes)), index + 1, total);
  std::fflush(stderr);
}

CollectiveCost bench_all_reduce(Communicator& comm, const Options& options) {
  std::set<std::int64_t> counts;
  for (int h : options.hidden) {
    for (int t : options.tokens) counts.insert(static_cast<std::int64_t>(h) * t);
  }
  std::vector<float> buffer(static_cast<std::size_t>(*counts.rbegin()), 0.0f);
  std::vector<CollectivePoint> points;
  for (const std::int64_t count : counts) {
    const double bytes = static_cast<double>(count) * sizeof(float);
    progress(comm, "all_reduce", bytes, points.size(), counts.size());
    const std::span<float> data(buffer.data(), static_cast<std::size_t>(count));
    points.push_back(measure_point(comm, options, bytes, [&] { comm.all_reduce_sum(data); }));
  }
  return CollectiveCost::fitted(std::move(points));
}

CollectiveCost bench_broadcast(Communicator& comm, const Options& options) {
  const std::vector<std::size_t> sizes = {8, 64, 256, 1024, 4096, 16384, 65536};
  std::vector<std::byte> buffer(sizes.back());
  std::vector<CollectivePoint> points;
  for (const std::size_t size : sizes) {
    progress(comm, "broadcast", static_cast<double>(size), points.size(), sizes.size());
    const std::span<std::byte> data(buffer.data(), size);
    points.push_back(
        measure_point(comm, options, static_cast<double>(size), [&] { comm.broadcast(data, 0); }));
  }
  return CollectiveCost::fitted(std::move(points));
}

// Per-rank float counts of the logits exchanges: T ShardStats records (6 floats each) and T rows
// of the vocabulary shard, T in --tokens.
std::vector<std::int64_t> logits_counts(const Communicator& comm, const Options& options) {
  std::set<std::int64_t> counts;
  const std::int64_t shard = (options.vocab + comm.size() - 1) / comm.size();
  for (int t : options.tokens) {
    counts.insert(6 * static_cast<std::int64_t>(t));
    counts.insert(shard * t);
  }
  return {counts.begin(), counts.end()};
}

CollectiveCost bench_gathers(Communicator& comm, const Options& options, bool all) {
  const std::vector<std::int64_t> counts = logits_counts(comm, options);
  const auto ranks = static_cast<std::size_t>(comm.size());
  std::vector<float> send(static_cast<std::size_t>(counts.back()), 1.0f);
  std::vector<float> recv(send.size() * ranks);
  std::vector<CollectivePoint> points;
  for (const std::int64_t count : counts) {
    const double bytes = static_cast<double>(count) * sizeof(float);
    progress(comm, all ? "all_gather" : "gather", bytes, points.size(), counts.size());
    const std::vector<std::int64_t> each(ranks, count);
    const auto n = static_cast<std::size_t>(count);
    const std::span<const float> mine(send.data(), n);
    const std::span<float> out(recv.data(), all || comm.is_root() ? n * ranks : 0);
    points.push_back(measure_point(comm, options, bytes, [&] {
      if (all) {
        comm.all_gather(mine, out, each);
      } else {
        comm.gather(mine, out, each, 0);
      }
    }));
  }
  return CollectiveCost::fitted(std::move(points));
}

// Nodes among the ranks: the ranks first on theirs (process_identity().local_rank, from MPI's
// shared-memory split, as the start lines report it).
int count_nodes(Communicator& comm) {
  std::vector<std::uint64_t> first(static_cast<std::size_t>(comm.size()));
  comm.all_gather_u64(process_identity().local_rank == 0 ? 1 : 0, first);
  return static_cast<int>(std::count(first.begin(), first.end(), std::uint64_t{1}));
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

void print_summary(const CommTable& table) {
  fmt::print("{} rank(s) on {} node(s), transport {}, {} iterations (+{} warm-up) per size\n",
             table.ranks, table.nodes, table.transport, table.iterations, table.warmup);
  fmt::print("{:<11} {:>10} {:>12} {:>12}\n", "op", "bytes", "median_us", "p90_us");
  for (const auto& [name, cost] : table.ops) {
    for (const CollectivePoint& p : cost.points) {
      fmt::print("{:<11} {:>10} {:>12.2f} {:>12.2f}\n", name,
                 message_bytes(static_cast<std::uint64_t>(p.bytes)), p.median_s * 1e6,
                 p.p90_s.value_or(0.0) * 1e6);
    }
  }
  for (const auto& [name, cost] : table.ops) {
    fmt::print("fit {:<11} latency {:.2f} us, bandwidth {:.3f} GB/s\n", name,
               cost.fit.latency_s * 1e6, cost.fit.bandwidth_bytes_per_s / 1e9);
  }
  if (table.memory_read_bytes_per_s) {
    fmt::print(
        "memory      read {:.1f} GB/s per rank, copy {:.1f} GB/s, all ranks read {:.1f} GB/s\n",
        *table.memory_read_bytes_per_s / 1e9, table.memory_copy_bytes_per_s.value_or(0) / 1e9,
        table.memory_aggregate_read_bytes_per_s.value_or(0) / 1e9);
  }
}

void measure_memory(Communicator& comm, CommTable& table) {
  if (comm.is_root()) fmt::print(stderr, "comm_bench: memory bandwidth\n");
  const MemoryBandwidth memory = measure_memory_bandwidth(comm);
  table.memory_read_bytes_per_s = memory.read_gbps * 1e9;
  table.memory_copy_bytes_per_s = memory.copy_gbps * 1e9;
  table.memory_aggregate_read_bytes_per_s = memory.aggregate_read_gbps * 1e9;
  table.memory_source = fmt::format("measure_memory_bandwidth: {} threads, {} MiB per rank",
                                    memory.threads, memory.buffer_bytes >> 20);
}

// Everything that runs collectives; its exceptions reach run() while MPI is still up.
int measure(const Options& options) {
  const std::unique_ptr<Communicator> comm = make_world_communicator();
  CommTable table;
  table.transport = options.transport;
  table.ranks = comm->size();
  table.nodes = count_nodes(*comm);
  table.measured_at = utc_now();
  table.tool = "comm_bench";
  table.source =
      fmt::format("bench/comm/comm_bench over {} ({})", comm->name(), process_identity().host);
  table.iterations = options.iters;
  table.warmup = options.warmup;
  table.notes = fmt::format("hidden {}, tokens {}, vocab {}", fmt::join(options.hidden, ","),
                            fmt::join(options.tokens, ","), options.vocab);
  table.ops["all_reduce"] = bench_all_reduce(*comm, options);
  table.ops["broadcast"] = bench_broadcast(*comm, options);
  table.ops["gather"] = bench_gathers(*comm, options, false);
  table.ops["all_gather"] = bench_gathers(*comm, options, true);
  if (options.memory) measure_memory(*comm, table);
  if (!comm->is_root()) return 0;
  print_summary(table);
  if (!options.out.empty()) {
    write_text_file_atomically(options.out, comm_table_json(table), "comm table");
    fmt::print("wrote {}\n", options.out);
  }
  return 0;
}

int run(const Options& options) {
  return run_bench_job("comm_bench", [&] { return measure(options); });
}

}  // namespace
}  // namespace selfspec

int main(int argc, char** argv) {
  selfspec::Options options;
  CLI::App app{"collective latency at decode-step sizes over the host communicator: a comm table"};
  app.add_option("--iters", options.iters, "timed calls per size")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--warmup", options.warmup, "untimed calls before each size")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--hidden", options.hidden, "hidden sizes of the all-reduces")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--tokens", options.tokens, "tokens per forward (T) of the all-reduces")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--vocab", options.vocab, "vocabulary size (logit rows: vocab / ranks per rank)")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--transport", options.transport,
                 "free text naming the transport, recorded in the table (e.g. "
                 "tcp-netns-netem-500us)")
      ->capture_default_str();
  bool no_memory = false;
  app.add_flag("--no-memory", no_memory, "do not measure the memory bandwidth");
  app.add_option("--out", options.out, "write the comm table (JSON) to this file (rank 0)");
  CLI11_PARSE(app, argc, argv);
  options.memory = !no_memory;
  try {
    return selfspec::run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "comm_bench error: %s\n", error.what());
    return 1;
  }
}
