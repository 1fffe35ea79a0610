#include "backend/memory_bandwidth.hpp"

#include "core/aligned_buffer.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/memory_stream.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

namespace selfspec {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t last_level_cache_bytes() {
  long size = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  size = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
  if (size <= 0) size = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return size > 0 ? static_cast<std::uint64_t>(size) : 32ull << 20;
}

double slowest(Communicator& comm, double seconds) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.all_gather_u64(static_cast<std::uint64_t>(seconds * 1e9), all);
  return static_cast<double>(*std::max_element(all.begin(), all.end())) * 1e-9;
}

}  // namespace

MemoryBandwidth measure_memory_bandwidth(Communicator& comm, std::uint64_t bytes_per_rank,
                                         int repetitions) {
  if (bytes_per_rank == 0)
    bytes_per_rank = std::max<std::uint64_t>(4 * last_level_cache_bytes(), 256ull << 20);
  const auto words = static_cast<std::int64_t>(bytes_per_rank / sizeof(float));
  AlignedBuffer<float> a(static_cast<std::size_t>(words));
  AlignedBuffer<float> b(static_cast<std::size_t>(words));
  // Touch every page (from the threads that will read it) with non-zero data.
  parallel_for(words, 1 << 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      a[static_cast<std::size_t>(i)] = static_cast<float>(i % 1024) * 0.5f;
    }
  });

  MemoryBandwidth result;
  result.buffer_bytes = bytes_per_rank;
  result.threads = num_threads();
  const double bytes = static_cast<double>(words) * sizeof(float);
  float sink = 0.0f;
  double best_read = 1e30, best_copy = 1e30, best_read_all = 1e30, best_copy_all = 1e30;
  for (int rep = 0; rep < repetitions; ++rep) {
    comm.barrier();
    auto start = Clock::now();
    sink += kernels::cpu::stream_read(a.data(), words);
    const double read_s = std::chrono::duration<double>(Clock::now() - start).count();
    best_read = std::min(best_read, read_s);
    best_read_all = std::min(best_read_all, slowest(comm, read_s));

    comm.barrier();
    start = Clock::now();
    kernels::cpu::stream_copy(a.data(), b.data(), words);
    const double copy_s = std::chrono::duration<double>(Clock::now() - start).count();
    best_copy = std::min(best_copy, copy_s);
    best_copy_all = std::min(best_copy_all, slowest(comm, copy_s));
  }
  sink += b[static_cast<std::size_t>(words / 2)];
  result.checksum = sink;
  result.read_gbps = bytes / best_read * 1e-9;
  result.copy_gbps = 2.0 * bytes / best_copy * 1e-9;
  result.aggregate_read_gbps = bytes * comm.size() / best_read_all * 1e-9;
  result.aggregate_copy_gbps = 2.0 * bytes * comm.size() / best_copy_all * 1e-9;
  return result;
}

}  // namespace selfspec
