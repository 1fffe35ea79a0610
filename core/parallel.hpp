// The CPU thread pool: OpenMP (libgomp) worker threads, sized once per process. Kernels call
// parallel_for over independent output ranges only (rows, heads, tokens), never over a reduction,
// so results do not depend on the thread count (part of the token-count invariance contract).
// Callers choose a grain large enough that a chunk outweighs waking a thread (tens of µs of
// work): on a busy machine every parallel region costs a wake-up per worker.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace selfspec {

// Sets the number of worker threads (>= 1).
void set_num_threads(int threads);
int num_threads();
// The default chosen by launch/: available cores divided by the local rank count, at least 1.
int default_num_threads(int local_ranks);

// Calls fn(begin, end) on disjoint chunks covering [0, count) whose boundaries are multiples of
// `grain` (except the last), in parallel. Runs inline when one chunk suffices. Chunks are claimed
// dynamically (an atomic counter), so a worker the OS preempts delays only the chunk it holds —
// the others take over the rest; which thread computes a chunk never changes its result.
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
  std::atomic<std::int64_t> next{0};
#pragma omp parallel num_threads(threads)
  {
    for (std::int64_t chunk = next.fetch_add(1, std::memory_order_relaxed); chunk < chunks;
         chunk = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(chunk * grain, std::min(count, (chunk + 1) * grain));
    }
  }
}

}  // namespace selfspec
