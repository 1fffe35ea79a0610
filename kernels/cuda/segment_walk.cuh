// The block-wide weighted walk both speculative_accept (logits.cu) and the vocab-shard walks
// (shard_walk.cu) draw with (nvcc only). One block of kThreads; thread s owns the contiguous id
// segment [begin, end) = [s·L, min(n, (s + 1)·L)), L = ceil(n / kThreads), and sums its positive
// weights in double in ascending ids; thread 0 adds the segment sums in segment order (an
// inclusive prefix). The one thread whose segment holds a target (before <= target < prefix)
// walks its segment ascending from `before`. Fixed orders, so the draw is the same on every run;
// the plain reference is backend/logit_statistics.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace selfspec::kernels::cuda::detail {

// The calling thread's segment of n ids: [*begin, *end).
template <int kThreads>
__device__ void thread_segment(std::int64_t n, std::int64_t* begin, std::int64_t* end) {
  const std::int64_t length = (n + kThreads - 1) / kThreads;
  *begin = static_cast<std::int64_t>(threadIdx.x) * length;
  *end = *begin + length < n ? *begin + length : n;
}

// The segment sums' inclusive prefix (s_prefix, kThreads entries) and the row's last id of
// positive weight (*s_last_positive, -1 when none), for the calling thread's segment
// [begin, end). Every thread of the block must call it; the results are visible to all on return.
template <int kThreads, typename Weight>
__device__ void segment_prefix(const Weight& weight, std::int64_t begin, std::int64_t end,
                               double* s_prefix, long long* s_last_positive) {
  if (threadIdx.x == 0) *s_last_positive = -1;
  __syncthreads();
  double local = 0.0;
  long long last_positive = -1;
  for (std::int64_t x = begin; x < end; ++x) {
    const double w = weight(x);
    if (w > 0.0) {
      local += w;
      last_positive = x;
    }
  }
  s_prefix[threadIdx.x] = local;
  if (last_positive >= 0) atomicMax(s_last_positive, last_positive);
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int s = 1; s < kThreads; ++s) s_prefix[s] += s_prefix[s - 1];
  }
  __syncthreads();
}

// After segment_prefix: the thread whose segment holds `target` (at most one) writes to *s_choice
// the id where the cumulative weight first exceeds it, or its segment's last id of positive
// weight when rounding leaves the target unreached. Other threads write nothing: *s_choice keeps
// what it held (callers set -1). The caller synchronises before reading it.
template <typename Weight>
__device__ void segment_choice(const Weight& weight, std::int64_t begin, std::int64_t end,
                               double target, const double* s_prefix, long long* s_choice) {
  const double before = threadIdx.x > 0 ? s_prefix[threadIdx.x - 1] : 0.0;
  if (!(target < s_prefix[threadIdx.x]) || target < before) return;
  double cumulative = before;
  long long segment_last = -1;
  for (std::int64_t x = begin; x < end; ++x) {
    const double w = weight(x);
    if (w <= 0.0) continue;
    segment_last = x;
    cumulative += w;
    if (target < cumulative) {
      *s_choice = x;
      return;
    }
  }
  *s_choice = segment_last;
}

}  // namespace selfspec::kernels::cuda::detail
