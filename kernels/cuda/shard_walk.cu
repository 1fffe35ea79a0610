// Vocab-shard walks for device-side verification (cuda_kernels.hpp, "vocab-shard walks"): the
// per-shard halves of the local-reduction verifier (verify/local_reduction_logits.cpp) on logit
// rows that stay in device memory. The plain reference is backend/logit_statistics.cpp
// (walk_softmax, residual_mass, walk_residual); tests/gpu/shard_walk_cuda_test.cpp compares them.
//
// One block of kWalkThreads per call, walking as speculative_accept does (segment_walk.cuh: fixed
// segments, summed in double in ascending ids, an inclusive prefix in segment order, one thread
// walking the segment that holds the target). A segment that rounding leaves unreached gives its
// last positive id, and a target beyond the total gives the row's last positive id (the CPU
// walk's fallback). The weights:
//   softmax:  exp(l · inv_T − m), m the shard's max from its row_stats record (NaN: no weight);
//   residual: max(0, p(x) − q(x)), p(x) = exp(l_p · inv_T − p_max) / p_sum, q likewise
//             (Leviathan et al. 2023, Alg. 1 step 7; Draft & Verify Alg. 4).
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/segment_walk.cuh"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace selfspec::kernels::cuda {
namespace {

using detail::require;
using detail::str;

struct QueriedIds {
  std::int32_t ids[kMaxQueriedIds];
  std::int32_t count;
};

__global__ void logits_at_kernel(const float* rows, std::int64_t vocab_local,
                                 std::int64_t vocab_begin, QueriedIds queried, float* out) {
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= queried.count) return;
  const std::int64_t local = static_cast<std::int64_t>(queried.ids[r]) - vocab_begin;
  out[r] = local >= 0 && local < vocab_local
               ? rows[static_cast<std::int64_t>(r) * vocab_local + local]
               : __int_as_float(0x7fc00000);  // quiet NaN
}

struct SoftmaxWeight {
  const float* row;
  double inv_temperature;
  double max;  // set in the kernel from the shard's row_stats record
  __device__ double operator()(std::int64_t x) const {
    const double scaled = __dmul_rn(static_cast<double>(row[x]), inv_temperature);
    if (isnan(scaled)) return 0.0;
    return exp(scaled - max);
  }
};

struct ResidualWeight {
  const float* p_row;
  const float* q_row;
  ResidualPair pair;
  __device__ double operator()(std::int64_t x) const {
    const double p =
        exp(__dmul_rn(static_cast<double>(p_row[x]), pair.inv_temperature) - pair.p_max) /
        pair.p_sum;
    const double q =
        exp(__dmul_rn(static_cast<double>(q_row[x]), pair.inv_temperature) - pair.q_max) /
        pair.q_sum;
    return p > q ? p - q : 0.0;  // NaN logits give no weight
  }
};

// The walk: out->id the global id where the cumulative weight first exceeds target (-1 when the
// row has no positive weight), out->logit logits[id] when `logits` is given.
template <typename Weight>
__device__ void walk(Weight weight, std::int64_t n, std::int64_t vocab_begin, double target,
                     const float* logits, DrawRecord* out) {
  __shared__ double s_prefix[kWalkThreads];
  __shared__ long long s_last_positive;
  __shared__ long long s_choice;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  detail::thread_segment<kWalkThreads>(n, &begin, &end);
  if (threadIdx.x == 0) s_choice = -1;
  detail::segment_prefix<kWalkThreads>(weight, begin, end, s_prefix, &s_last_positive);
  detail::segment_choice(weight, begin, end, target, s_prefix, &s_choice);
  __syncthreads();
  if (threadIdx.x == 0) {
    const long long local = s_choice >= 0 ? s_choice : s_last_positive;
    DrawRecord record;
    if (local >= 0) {
      record.id = static_cast<std::int32_t>(vocab_begin + local);
      record.logit = logits != nullptr ? logits[local] : 0.0f;
    }
    *out = record;
  }
}

__global__ void __launch_bounds__(kWalkThreads)
    walk_softmax_kernel(const float* row, std::int64_t n, std::int64_t vocab_begin,
                        double inv_temperature, const RowStatsRecord* stats, double target,
                        DrawRecord* out) {
  if (stats->argmax < 0) {  // no finite logit in this shard: no mass (block-uniform)
    if (threadIdx.x == 0) *out = DrawRecord{};
    return;
  }
  walk(SoftmaxWeight{row, inv_temperature, stats->max}, n, vocab_begin, target, row, out);
}

__global__ void __launch_bounds__(kWalkThreads)
    walk_residual_kernel(const float* p_row, const float* q_row, std::int64_t n,
                         std::int64_t vocab_begin, ResidualPair pair, double target,
                         DrawRecord* out) {
  walk(ResidualWeight{p_row, q_row, pair}, n, vocab_begin, target, p_row, out);
}

__global__ void __launch_bounds__(kWalkThreads)
    residual_mass_kernel(const float* p_row, const float* q_row, std::int64_t n, ResidualPair pair,
                         double* out) {
  __shared__ double s_prefix[kWalkThreads];
  __shared__ long long s_last_positive;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  detail::thread_segment<kWalkThreads>(n, &begin, &end);
  detail::segment_prefix<kWalkThreads>(ResidualWeight{p_row, q_row, pair}, begin, end, s_prefix,
                                       &s_last_positive);
  if (threadIdx.x == 0) *out = s_prefix[kWalkThreads - 1];
}

void check_row(std::int64_t n, std::int64_t vocab_begin, const char* what) {
  require(
      n > 0 && vocab_begin >= 0 && vocab_begin + n <= 0x7fffffff,
      std::string(what) + ": bad shard (vocab_begin " + str(vocab_begin) + ", " + str(n) + " ids)");
}

}  // namespace

void logits_at(const float* rows, std::int64_t vocab_local, std::int64_t vocab_begin,
               std::span<const std::int32_t> ids, float* out, cudaStream_t stream) {
  check_row(vocab_local, vocab_begin, "logits_at");
  require(ids.size() <= static_cast<std::size_t>(kMaxQueriedIds),
          "logits_at: " + str(static_cast<std::int64_t>(ids.size())) + " ids (at most " +
              str(kMaxQueriedIds) + ")");
  if (ids.empty()) return;
  QueriedIds queried{};
  for (std::size_t i = 0; i < ids.size(); ++i) queried.ids[i] = ids[i];
  queried.count = static_cast<std::int32_t>(ids.size());
  logits_at_kernel<<<1, kMaxQueriedIds, 0, stream>>>(rows, vocab_local, vocab_begin, queried, out);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

void walk_softmax(const float* row, std::int64_t vocab_local, std::int64_t vocab_begin,
                  double inv_temperature, const RowStatsRecord* stats, double target,
                  DrawRecord* out, cudaStream_t stream) {
  check_row(vocab_local, vocab_begin, "walk_softmax");
  require(row != nullptr && stats != nullptr && out != nullptr, "walk_softmax: null pointer");
  walk_softmax_kernel<<<1, kWalkThreads, 0, stream>>>(row, vocab_local, vocab_begin,
                                                      inv_temperature, stats, target, out);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

void residual_mass(const float* p_row, const float* q_row, std::int64_t vocab_local,
                   const ResidualPair& pair, double* out, cudaStream_t stream) {
  check_row(vocab_local, 0, "residual_mass");
  require(p_row != nullptr && q_row != nullptr && out != nullptr, "residual_mass: null pointer");
  residual_mass_kernel<<<1, kWalkThreads, 0, stream>>>(p_row, q_row, vocab_local, pair, out);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

void walk_residual(const float* p_row, const float* q_row, std::int64_t vocab_local,
                   std::int64_t vocab_begin, const ResidualPair& pair, double target,
                   DrawRecord* out, cudaStream_t stream) {
  check_row(vocab_local, vocab_begin, "walk_residual");
  require(p_row != nullptr && q_row != nullptr && out != nullptr, "walk_residual: null pointer");
  walk_residual_kernel<<<1, kWalkThreads, 0, stream>>>(p_row, q_row, vocab_local, vocab_begin, pair,
                                                       target, out);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

}  // namespace selfspec::kernels::cuda
