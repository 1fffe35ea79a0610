// Logit-row kernels: shard statistics, sampling warps (temperature, top-k, top-p), softmax and
// speculative-sampling acceptance. Each row is handled by one block (the rows are few: T <= 17),
// with fixed-order or integer (order-free) reductions, so every result is deterministic.
//
// row_stats (backend/logit_statistics.hpp semantics): 512 threads per row. Thread i scans the
//   elements i, i + 512, ... ascending, keeping the strictly greater scaled value l · inv_t
//   (double, NaN never wins) and so its first maximum; (value desc, index asc) candidates are
//   combined by an xor butterfly and then over the warps — the first argmax of the row. The sum
//   Σ exp(l · inv_t − max) (NaN skipped) is accumulated per thread in that element order, then
//   by the block in a fixed order (butterfly, warps ascending). The CPU sums sequentially in
//   ascending ids, so sum_exp agrees to rounding (~1e-15 relative), max and argmax exactly.
// warp_logits (verify/sampler.cpp warp_candidates semantics): 512 threads per row.
//   Floats are mapped to order-preserving 32-bit keys (-0 as +0; NaN entries never survive).
//   top-k: the k-th largest key by a 4-pass, 8-bit radix select over integer histograms in
//     shared memory (atomic integer adds: order-free); survivors are the keys >= it (ties kept).
//   top-p: p_x = exp(l_x / T − M) / Z in double over the survivors (Z a fixed-order block sum),
//     converted to 60-bit fixed point so that masses add exactly in any order. The removed set
//     is the longest prefix of the ascending order (logit asc, id desc) whose cumulative mass is
//     <= 1 − top_p: a radix search over the keys with mass histograms finds the logit v where
//     the mass crosses, then, inside v's tie group (equal p), the number r of highest ids
//     removed is computed exactly and the cut id found by a radix select over ids. The group of
//     the maximum keeps at least one id (HF keeps the most likely token).
//   Survivors become f32(double(l) / T), the rest -inf. Sets match the CPU except where the
//   cumulative mass ties 1 − top_p to within rounding (~1e-16).
// softmax_rows: 512 threads per row; max (exact), Σ expf(l − max) in double (fixed order),
//   p = f32(expf(l − max) / Σ). NaN entries count as -inf; a row without a finite value gives 0s.
// speculative_accept: one block of 512 threads. Thread 0 runs the acceptance tests in order
//   (double: u_j · q_j(d_j) < p_j(d_j); a drafted id outside the vocabulary is rejected). The
//   inverse-CDF draw over ascending ids at uniforms[k]: thread s owns a contiguous id segment,
//   sums its weights in double ascending; thread 0 scans the segment sums in order; the thread
//   whose segment holds target = u · mass walks it ascending from the exclusive prefix. Weights
//   are max(0, p − q) after a rejection (p itself when that residual has no mass) and p for the
//   bonus token. Agrees with a sequential ascending walk except within rounding of a boundary.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/segment_walk.cuh"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace selfspec::kernels::cuda {
namespace {

using detail::kFullMask;
using detail::kWarpSize;
using detail::require;
using detail::str;

constexpr int kRowThreads = 512;
constexpr int kRowWarps = kRowThreads / kWarpSize;
constexpr int kBins = 256;
constexpr double kFixedOne = 1152921504606846976.0;  // 2^60: fixed-point unit of probability

// ------------------------------------------------------------------------------------------------
// row_stats

// Is candidate (av, ai) better than (bv, bi)? Larger value first, then smaller index; index -1
// (no candidate) is worst.
__device__ __forceinline__ bool better(double av, long long ai, double bv, long long bi) {
  if (ai < 0) return false;
  if (bi < 0) return true;
  return av > bv || (av == bv && ai < bi);
}

__global__ void __launch_bounds__(kRowThreads)
    row_stats_kernel(const float* logits, std::int64_t vocab_local, std::int64_t vocab_begin,
                     double inv_temperature, RowStatsRecord* out) {
  __shared__ double s_value[kRowWarps];
  __shared__ long long s_index[kRowWarps];
  __shared__ double s_scratch[kRowWarps];
  const float* row = logits + static_cast<std::int64_t>(blockIdx.x) * vocab_local;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;

  double best = -INFINITY;
  long long best_index = -1;
  for (std::int64_t i = threadIdx.x; i < vocab_local; i += kRowThreads) {
    const double scaled = __dmul_rn(static_cast<double>(row[i]), inv_temperature);
    if (scaled > best) {
      best = scaled;
      best_index = i;
    }
  }
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const double other = __shfl_xor_sync(kFullMask, best, offset);
    const long long other_index = __shfl_xor_sync(kFullMask, best_index, offset);
    if (better(other, other_index, best, best_index)) {
      best = other;
      best_index = other_index;
    }
  }
  if (lane == 0) {
    s_value[warp] = best;
    s_index[warp] = best_index;
  }
  __syncthreads();
  best = s_value[0];
  best_index = s_index[0];
  for (int w = 1; w < kRowWarps; ++w) {
    if (better(s_value[w], s_index[w], best, best_index)) {
      best = s_value[w];
      best_index = s_index[w];
    }
  }
  // best/best_index are now identical in every thread (block-uniform).
  double sum = 0.0;
  if (best_index >= 0) {
    for (std::int64_t i = threadIdx.x; i < vocab_local; i += kRowThreads) {
      const double scaled = __dmul_rn(static_cast<double>(row[i]), inv_temperature);
      if (!isnan(scaled)) sum += exp(scaled - best);
    }
  }
  const double total = detail::block_sum(sum, s_scratch);
  if (threadIdx.x == 0) {
    RowStatsRecord record;
    if (best_index >= 0) {
      record.max = best;
      record.sum_exp = total;
      record.argmax = static_cast<std::int32_t>(vocab_begin + best_index);
    } else {
      record.max = -INFINITY;
      record.sum_exp = 0.0;
      record.argmax = -1;
    }
    out[blockIdx.x] = record;
  }
}

// ------------------------------------------------------------------------------------------------
// warp_logits

// Order-preserving key of a float: a < b (as floats) <=> key(a) < key(b); -0 maps like +0.
__device__ __forceinline__ unsigned order_key(float value) {
  const unsigned bits = value == 0.0f ? 0u : __float_as_uint(value);
  return (bits & 0x80000000u) != 0u ? ~bits : (bits | 0x80000000u);
}
__device__ __forceinline__ float key_value(unsigned key) {
  return __uint_as_float((key & 0x80000000u) != 0u ? (key ^ 0x80000000u) : ~key);
}

// Shared state of the warp_logits block.
struct WarpShared {
  unsigned count[kBins];
  unsigned long long mass[kBins];
  unsigned long long state[4];
  double scratch[kRowWarps];
};

// The number of i in [0, n) with include(i). Every thread calls it; the result is uniform.
template <class Include>
__device__ unsigned block_count(std::int64_t n, Include include, WarpShared& s) {
  if (threadIdx.x == 0) s.state[0] = 0;
  __syncthreads();
  unsigned local = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) local += include(i) ? 1u : 0u;
  atomicAdd(&s.state[0], static_cast<unsigned long long>(local));
  __syncthreads();
  const auto total = static_cast<unsigned>(s.state[0]);
  __syncthreads();
  return total;
}

// The largest key(i) over i with include(i) (0 when none). Uniform result.
template <class Include, class Key>
__device__ unsigned block_max_key(std::int64_t n, Include include, Key key, WarpShared& s) {
  if (threadIdx.x == 0) s.state[0] = 0;
  __syncthreads();
  unsigned local = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    if (include(i)) local = max(local, key(i));
  }
  atomicMax(&s.state[0], static_cast<unsigned long long>(local));
  __syncthreads();
  const auto result = static_cast<unsigned>(s.state[0]);
  __syncthreads();
  return result;
}

// The rank-th smallest (1-based) key(i) over i with include(i); requires 1 <= rank <= count.
// Four passes of 8-bit radix histograms (integer atomics: the counts do not depend on order).
template <class Include, class Key>
__device__ unsigned block_select(std::int64_t n, unsigned rank, Include include, Key key,
                                 WarpShared& s) {
  unsigned prefix = 0;
  unsigned mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = static_cast<int>(threadIdx.x); b < kBins; b += static_cast<int>(blockDim.x)) {
      s.count[b] = 0;
    }
    __syncthreads();
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      if (!include(i)) continue;
      const unsigned k = key(i);
      if ((k & mask) != prefix) continue;
      atomicAdd(&s.count[(k >> shift) & 0xffu], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned below = 0;
      unsigned bin = kBins - 1;
      for (unsigned b = 0; b < kBins; ++b) {
        if (below + s.count[b] >= rank) {
          bin = b;
          break;
        }
        below += s.count[b];
      }
      s.state[0] = bin;
      s.state[1] = rank - below;
    }
    __syncthreads();
    prefix |= static_cast<unsigned>(s.state[0]) << shift;
    mask |= 0xffu << shift;
    rank = static_cast<unsigned>(s.state[1]);
    __syncthreads();
  }
  return prefix;
}

// The smallest key v such that the fixed-point mass of the included elements with key <= v
// exceeds `threshold`, with base = mass(key < v), the count and mass of key == v. found = false
// when the whole mass is <= threshold.
struct MassCut {
  bool found = false;
  unsigned key = 0;
  unsigned long long base = 0;
  unsigned long long group_count = 0;
  unsigned long long group_mass = 0;
};

template <class Include, class Key, class Mass>
__device__ MassCut block_mass_cut(std::int64_t n, unsigned long long threshold, Include include,
                                  Key key, Mass mass, WarpShared& s) {
  MassCut cut;
  cut.found = true;
  unsigned prefix = 0;
  unsigned mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = static_cast<int>(threadIdx.x); b < kBins; b += static_cast<int>(blockDim.x)) {
      s.count[b] = 0;
      s.mass[b] = 0;
    }
    __syncthreads();
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      if (!include(i)) continue;
      const unsigned k = key(i);
      if ((k & mask) != prefix) continue;
      const unsigned b = (k >> shift) & 0xffu;
      atomicAdd(&s.count[b], 1u);
      atomicAdd(&s.mass[b], mass(i));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long accumulated = cut.base;
      unsigned long long pick = kBins;  // none
      for (unsigned b = 0; b < kBins; ++b) {
        if (s.count[b] == 0) continue;
        if (accumulated + s.mass[b] > threshold) {
          pick = b;
          break;
        }
        accumulated += s.mass[b];
      }
      s.state[0] = pick;
      s.state[1] = accumulated;
      s.state[2] = pick < kBins ? s.count[pick] : 0;
      s.state[3] = pick < kBins ? s.mass[pick] : 0;
    }
    __syncthreads();
    const unsigned long long pick = s.state[0];
    cut.base = s.state[1];
    cut.group_count = s.state[2];
    cut.group_mass = s.state[3];
    __syncthreads();
    if (pick >= kBins) {  // block-uniform
      cut.found = false;
      return cut;
    }
    prefix |= static_cast<unsigned>(pick) << shift;
    mask |= 0xffu << shift;
  }
  cut.key = prefix;
  return cut;
}

__global__ void __launch_bounds__(kRowThreads)
    warp_logits_kernel(float* logits, std::int64_t vocab, double temperature, int top_k,
                       double top_p) {
  __shared__ WarpShared s;
  float* row = logits + static_cast<std::int64_t>(blockIdx.x) * vocab;
  const auto valid = [&](std::int64_t i) { return !isnan(row[i]); };
  const auto key_of = [&](std::int64_t i) { return order_key(row[i]); };

  const unsigned n_valid = block_count(vocab, valid, s);
  // 1. top-k: survivors are the keys >= the k-th largest key.
  unsigned kth_key = 0;
  if (top_k > 0 && static_cast<unsigned>(top_k) < n_valid) {
    const auto complement = [&](std::int64_t i) { return ~order_key(row[i]); };
    kth_key = ~block_select(vocab, static_cast<unsigned>(top_k), valid, complement, s);
  }
  const auto survivor = [&](std::int64_t i) { return valid(i) && order_key(row[i]) >= kth_key; };

  // 2. top-p over the survivors.
  bool nucleus = false;
  unsigned cut_key = 0;
  unsigned long long keep_in_group = 0;
  unsigned cut_id = 0;
  if (top_p < 1.0 && n_valid > 0) {
    nucleus = true;
    const unsigned max_key = block_max_key(vocab, survivor, key_of, s);
    const double max_scaled = static_cast<double>(key_value(max_key)) / temperature;
    double local = 0.0;
    for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      if (survivor(i)) local += exp(static_cast<double>(row[i]) / temperature - max_scaled);
    }
    const double z = detail::block_sum(local, s.scratch);
    const auto mass_of = [&](std::int64_t i) {
      const double p = exp(static_cast<double>(row[i]) / temperature - max_scaled) / z;
      return __double2ull_rn(p * kFixedOne);
    };
    const unsigned long long threshold = __double2ull_rn((1.0 - top_p) * kFixedOne);
    const MassCut cut = block_mass_cut(vocab, threshold, survivor, key_of, mass_of, s);
    if (!cut.found) {  // everything could go: keep the most likely token only
      cut_key = max_key;
      keep_in_group = 1;
    } else {
      cut_key = cut.key;
      const unsigned long long count = cut.group_count;
      const unsigned long long each = count > 0 ? cut.group_mass / count : 0;  // equal logits
      unsigned long long removed = count;
      if (each > 0) {
        const unsigned long long fit = (threshold - cut.base) / each;  // base <= threshold
        removed = fit < count ? fit : count;
      }
      if (cut_key == max_key && removed >= count) removed = count - 1;  // keep >= 1
      keep_in_group = count - removed;
    }
    if (keep_in_group > 0) {
      // The keep_in_group-th smallest id of the cut group (ascending order keeps low ids).
      const auto in_group = [&](std::int64_t i) {
        return survivor(i) && order_key(row[i]) == cut_key;
      };
      const auto id_key = [](std::int64_t i) { return static_cast<unsigned>(i); };
      cut_id = block_select(vocab, static_cast<unsigned>(keep_in_group), in_group, id_key, s);
    }
  }
  __syncthreads();  // every read of the row above precedes the writes below

  // 3. write: survivors scaled, the rest -inf.
  for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float value = row[i];
    bool keep = !isnan(value) && order_key(value) >= kth_key;
    if (keep && nucleus) {
      const unsigned k = order_key(value);
      keep =
          k > cut_key || (k == cut_key && keep_in_group > 0 && static_cast<unsigned>(i) <= cut_id);
    }
    row[i] = keep ? static_cast<float>(static_cast<double>(value) / temperature) : -INFINITY;
  }
}

// ------------------------------------------------------------------------------------------------
// softmax_rows

__global__ void __launch_bounds__(kRowThreads)
    softmax_rows_kernel(const float* logits, std::int64_t vocab, float* probs) {
  __shared__ float s_max[kRowWarps];
  __shared__ double s_scratch[kRowWarps];
  const float* row = logits + static_cast<std::int64_t>(blockIdx.x) * vocab;
  float* out = probs + static_cast<std::int64_t>(blockIdx.x) * vocab;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;

  float local_max = -INFINITY;
  for (std::int64_t i = threadIdx.x; i < vocab; i += kRowThreads)
    local_max = fmaxf(local_max, row[i]);
  local_max = detail::warp_max(local_max);
  if (lane == 0) s_max[warp] = local_max;
  __syncthreads();
  float m = s_max[0];
  for (int w = 1; w < kRowWarps; ++w) m = fmaxf(m, s_max[w]);
  const bool any = m != -INFINITY && !isnan(m);  // block-uniform

  double local = 0.0;
  if (any) {
    for (std::int64_t i = threadIdx.x; i < vocab; i += kRowThreads) {
      const float v = row[i];
      if (!isnan(v)) local += static_cast<double>(expf(v - m));
    }
  }
  const double total = detail::block_sum(local, s_scratch);
  for (std::int64_t i = threadIdx.x; i < vocab; i += kRowThreads) {
    const float v = row[i];
    out[i] =
        (any && !isnan(v)) ? static_cast<float>(static_cast<double>(expf(v - m)) / total) : 0.0f;
  }
}

// ------------------------------------------------------------------------------------------------
// speculative_accept

constexpr int kAcceptThreads = 512;

__global__ void __launch_bounds__(kAcceptThreads)
    speculative_accept_kernel(const float* p, const float* q, std::int64_t k, std::int64_t vocab,
                              const std::int32_t* drafted, const double* uniforms,
                              std::int32_t* out_accepted, std::int32_t* out_next) {
  __shared__ double s_prefix[kAcceptThreads];  // inclusive prefix sums of the segment weights
  __shared__ long long s_accepted;
  __shared__ long long s_choice;
  __shared__ long long s_last_positive;

  if (threadIdx.x == 0) {
    long long accepted = 0;
    for (; accepted < k; ++accepted) {
      const std::int32_t d = drafted[accepted];
      if (d < 0 || d >= vocab) break;  // an impossible draft is rejected
      const double p_d = p[accepted * vocab + d];
      const double q_d = q[accepted * vocab + d];
      if (!(uniforms[accepted] * q_d < p_d)) break;
    }
    s_accepted = accepted;
  }
  __syncthreads();
  const long long accepted = s_accepted;
  const float* p_row = p + accepted * vocab;
  const float* q_row = accepted < k ? q + accepted * vocab : nullptr;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  detail::thread_segment<kAcceptThreads>(vocab, &begin, &end);

  // Residual weights after a rejection; p itself when the residual is empty or for the bonus.
  bool residual = q_row != nullptr;
  double mass = 0.0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto weight = [&](std::int64_t x) {
      const double pv = p_row[x];
      if (!residual) return pv > 0.0 ? pv : 0.0;
      const double qv = q_row[x];
      return pv > qv ? pv - qv : 0.0;
    };
    if (threadIdx.x == 0) s_choice = -1;
    detail::segment_prefix<kAcceptThreads>(weight, begin, end, s_prefix, &s_last_positive);
    mass = s_prefix[kAcceptThreads - 1];
    if (!(residual && !(mass > 0.0))) {  // block-uniform
      detail::segment_choice(weight, begin, end, uniforms[k] * mass, s_prefix, &s_choice);
      __syncthreads();
      if (threadIdx.x == 0) {
        const long long next = s_choice >= 0 ? s_choice : s_last_positive;  // rounding: the end
        *out_accepted = static_cast<std::int32_t>(accepted);
        *out_next = static_cast<std::int32_t>(next);
      }
      return;
    }
    residual = false;  // empty residual: draw from p
    __syncthreads();
  }
}

void check_rows(std::int64_t rows, std::int64_t vocab, const char* what) {
  require(rows >= 0 && vocab > 0,
          std::string(what) + ": bad shape (rows " + str(rows) + ", vocab " + str(vocab) + ")");
  require(
      rows <= 0x7fffffff && vocab <= 0x7fffffff,
      std::string(what) + ": shape too large (rows " + str(rows) + ", vocab " + str(vocab) + ")");
}

}  // namespace

void row_stats(const float* logits, std::int64_t rows, std::int64_t vocab_local,
               std::int64_t vocab_begin, double inv_temperature, RowStatsRecord* out,
               cudaStream_t stream) {
  check_rows(rows, vocab_local, "row_stats");
  require(vocab_begin >= 0 && vocab_begin + vocab_local <= 0x7fffffff,
          "row_stats: ids beyond int32 (vocab_begin " + str(vocab_begin) + ")");
  if (rows == 0) return;
  row_stats_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      logits, vocab_local, vocab_begin, inv_temperature, out);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

void warp_logits(float* logits, std::int64_t rows, std::int64_t vocab, double temperature,
                 std::int32_t top_k, double top_p, cudaStream_t stream) {
  check_rows(rows, vocab, "warp_logits");
  require(temperature > 0.0 && std::isfinite(temperature),
          "warp_logits: temperature must be finite and > 0");
  require(top_k >= 0, "warp_logits: negative top_k " + str(top_k));
  require(top_p > 0.0 && top_p <= 1.0, "warp_logits: top_p must be in (0, 1]");
  if (rows == 0) return;
  warp_logits_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      logits, vocab, temperature, top_k, top_p);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

void softmax_rows(const float* logits, std::int64_t rows, std::int64_t vocab, float* probs,
                  cudaStream_t stream) {
  check_rows(rows, vocab, "softmax_rows");
  if (rows == 0) return;
  softmax_rows_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(logits, vocab,
                                                                               probs);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

void speculative_accept(const float* p, const float* q, std::int64_t k, std::int64_t vocab,
                        const std::int32_t* drafted, const double* uniforms,
                        std::int32_t* out_accepted, std::int32_t* out_next, cudaStream_t stream) {
  require(k >= 0 && vocab > 0 && vocab <= 0x7fffffff,
          "speculative_accept: bad shape (k " + str(k) + ", vocab " + str(vocab) + ")");
  require(p != nullptr && uniforms != nullptr && out_accepted != nullptr && out_next != nullptr &&
              (k == 0 || (q != nullptr && drafted != nullptr)),
          "speculative_accept: null pointer");
  speculative_accept_kernel<<<1, kAcceptThreads, 0, stream>>>(p, q, k, vocab, drafted, uniforms,
                                                              out_accepted, out_next);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

}  // namespace selfspec::kernels::cuda
