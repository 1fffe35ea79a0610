// Streaming-memory kernels used to measure the machine's peak bandwidth in the same run as a
// benchmark (the "measured peak" that decode bandwidth is reported against):
//   stream_read:  sums a buffer (every byte loaded once, nothing written), as decode reads weights;
//   stream_copy:  dst = src (bytes read + bytes written).
// AVX2 with several independent accumulators and software prefetch, so the loop is limited by
// memory, not by load latency; scalar fallback. Multithreaded over contiguous chunks.
#pragma once

#include <cstdint>

namespace selfspec::kernels::cpu {

// Returns the sum of the n floats (a value the caller keeps so the loads are not elided).
float stream_read(const float* data, std::int64_t n);
void stream_copy(const float* src, float* dst, std::int64_t n);

}  // namespace selfspec::kernels::cpu
