// The CPU thread pool: OpenMP (libgomp) worker threads, sized once per process. Kernels call
// parallel_for over independent output ranges only (rows, heads, tokens), never over a reduction,
// so results do not depend on the thread count (part of the token-count invariance contract).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace selfspec {

// Sets the number of worker threads (>= 1).
void set_num_threads(int threads);
int num_threads();
// The default chosen by launch/: available cores divided by the local rank count, at least 1.
int default_num_threads(int local_ranks);

// Calls fn(begin, end) on disjoint chunks covering [0, count) whose boundaries are multiples of
// `grain` (except the last), in parallel. Runs inline when one chunk suffices.
template <typename Fn>
void parallel_for(std::int64_t count, std::int64_t grain, Fn&& fn) {
  if (count <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t chunks = (count + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<std::int64_t>(num_threads(), chunks));
  if (threads <= 1) {
    fn(std::int64_t{0}, count);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t t = omp_get_thread_num();
    const std::int64_t nt = omp_get_num_threads();
    const std::int64_t chunk_begin = chunks * t / nt;
    const std::int64_t chunk_end = chunks * (t + 1) / nt;
    const std::int64_t begin = chunk_begin * grain;
    const std::int64_t end = std::min(count, chunk_end * grain);
    if (begin < end) fn(begin, end);
  }
}

}  // namespace selfspec
