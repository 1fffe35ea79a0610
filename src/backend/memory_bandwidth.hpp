// Measures this machine's streaming memory bandwidth in-process, so benchmarks can state decode
// bandwidth as a fraction of a peak measured in the same run (not a datasheet number).
// Two kernels over a buffer much larger than the last-level cache, with all worker threads and,
// under MPI, all ranks at once (aggregate = total bytes / slowest rank's time):
//   read:  sum of the buffer with AVX2 loads (what decode does to weights)
//   copy:  b[i] = a[i] (counts bytes read + bytes written)
// The best of several repetitions is reported (STREAM's convention).
#pragma once

#include "comm/communicator.hpp"

#include <cstdint>

namespace selfspec {

struct MemoryBandwidth {
  double read_gbps = 0.0;            // per rank
  double copy_gbps = 0.0;            // per rank
  double aggregate_read_gbps = 0.0;  // all ranks together
  double aggregate_copy_gbps = 0.0;
  std::uint64_t buffer_bytes = 0;
  int threads = 0;
  float checksum = 0.0f;  // keeps the reads observable
};

// bytes_per_rank: size of the buffer each rank streams (0: 4 × last-level cache, at least 256 MiB).
MemoryBandwidth measure_memory_bandwidth(Communicator& comm, std::uint64_t bytes_per_rank = 0,
                                         int repetitions = 5);

}  // namespace selfspec
