// Scaled dot-product attention over the KV cache, split-KV (flash-decoding) style (semantics of
// kernels/cpu/attention.hpp; n_past read from StepParams in device memory).
//
// Query t of head h (KV head h / group) sees the slots [0, n_past) and the new slots n_past + j
// the mask allows (causal: j <= t; tree: mask[t][j] != 0). Those visible slots, in ascending slot
// order, are ranks 0 .. n_visible - 1, cut into splits of attention_split_slots(n_visible) ranks
// (attention_split.hpp). Everything below is a function of the ranks' keys and values, so a query
// gives the same bits alone, in a batch of any size, over any cache capacity, and as a tree node
// (its ancestors at scattered slots) as when the same token is decoded after the path was kept
// (its ancestors at consecutive slots): the CPU attention's ascending-slot contract, kept on the
// GPU. (The previous kernel cut chunks by absolute slot, so a tree node's sums were grouped
// differently from the same token decoded alone.)
//
// One kernel, one block of 128 threads (4 warps) per (token, head, split); the grid is sized by
// the cache capacity (attention_grid_splits) and blocks past the query's splits exit at once, so a
// captured graph serves any n_past. Inside a split, warp w takes the groups of 8 consecutive ranks
// starting at 8w, 8w + 32, ... and keeps an online softmax over them, in that order:
//   1. scores: s_u = (Σ_d q[d] k_u[d]: per lane an fmaf chain over the lane's dims in ascending
//      order, then an xor butterfly) · scale, for the group's 8 keys, whose loads issue together
//      (ranks past the split read a valid key and are dropped);
//   2. m' = max(m, max_u s_u); l and acc[d] are scaled by expf(m − m'); then for u ascending:
//      p = expf(s_u − m'), l += p, acc[d] = fmaf(p, v_u[d], acc[d]).
// The 4 warps' (m_w, l_w, acc_w) are combined in warp order: M = max m_w, L = Σ expf(m_w − M) l_w,
// A[d] = Σ expf(m_w − M) acc_w[d]. A query with one split writes out[d] = A[d] / L; otherwise every
// split writes its (M, L, A) to the workspace, and the last of the query's blocks to finish (an
// atomic counter per query, reset by that block) merges the splits in ascending order the same
// way and writes out[d] = Σ_s expf(M_s − M*) A_s[d] / Σ_s expf(M_s − M*) L_s. A query with no
// visible slot gets zeros. Head dims of 64, 128 and 256 give each lane contiguous dims (8- or
// 16-byte loads; q, the cache and out must then be 16-byte aligned); other head dims give lane l
// the dims l, l + 32, ... (scalar loads). The cache holds f32 or bf16 (kernels/cpu/attention.hpp):
// a bf16 element is widened exactly as it is loaded (half the bytes per key), and everything after
// the load is the same f32 arithmetic, so a bf16 cache gives the bits of an f32 cache holding the
// same values. The result differs from the CPU's (double denominator, normalise-then-sum) by
// rounding only.
//
// Workspace: the merge counters first, in a region of fixed size (kCounterSlots counters, the
// same for every call and every dims), then the partials of `tokens_per_pass` tokens; longer
// inputs (prefill) run in passes of that many tokens. tokens_per_pass is a function of the dims
// alone, so attention_workspace_bytes() and attention() agree. The counters' place must not
// depend on the call: a workspace shared by calls of different T (decode, verification) would
// otherwise find one call's partials where the next keeps its counters (the first GPU run of this
// kernel failed its lossless tests that way once a query had two splits). Programmatic dependent
// launch: the kernel waits for the previous kernel before its first read (cuda_common.cuh).
#include "kernels/cuda/attention_split.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/shared_math.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace selfspec::kernels::cuda {
namespace {

using detail::kFullMask;
using detail::kWarpSize;
using detail::require;
using detail::str;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kGroup = 8;          // consecutive ranks a warp handles together
constexpr int kMaxDimPerLane = 8;  // head_dim <= 256
constexpr int kMaxTreeTokens = static_cast<int>(kSmallBatch);
static_assert(kAttentionMinSplit % (kWarps * kGroup) == 0,
              "a split size must be whole rounds of the block's warps");

// The workspace budget that limits the tokens per pass (verification batches always fit).
constexpr std::size_t kWorkspaceBudget = std::size_t{64} << 20;
// Merge counters, one per (token, head) of a pass, at the start of every workspace.
constexpr std::int64_t kCounterSlots = 16384;
constexpr std::size_t kCounterBytes = kCounterSlots * sizeof(unsigned);

struct Geometry {
  std::int64_t grid_splits = 0;      // splits per query in the grid
  std::int64_t tokens_per_pass = 0;  // tokens whose partials fit the workspace at once
  std::size_t o_floats = 0;          // partial outputs, [pass tokens][heads][splits][head_dim]
  std::size_t ml_floats = 0;         // partial M and L, [pass tokens][heads][splits] each
};

Geometry geometry(const AttentionDims& dims) {
  Geometry g;
  g.grid_splits = attention_grid_splits(dims.capacity);
  const auto heads = static_cast<std::size_t>(dims.n_q_heads);
  const std::size_t per_token = heads * static_cast<std::size_t>(g.grid_splits) *
                                (static_cast<std::size_t>(dims.head_dim) + 2) * sizeof(float);
  std::int64_t fit = static_cast<std::int64_t>(kWorkspaceBudget / per_token);
  if (fit < kSmallBatch) fit = kSmallBatch;
  const std::int64_t counter_limit = kCounterSlots / dims.n_q_heads;
  if (fit > counter_limit) fit = counter_limit;
  g.tokens_per_pass = dims.n_tokens < fit ? dims.n_tokens : fit;
  if (g.tokens_per_pass < 1) g.tokens_per_pass = 1;
  const std::size_t units =
      static_cast<std::size_t>(g.tokens_per_pass) * heads * static_cast<std::size_t>(g.grid_splits);
  g.o_floats = units * static_cast<std::size_t>(dims.head_dim);
  g.ml_floats = units;
  return g;
}

// Contiguous dims per lane (vector loads) for head dims 64, 128 and 256.
bool contiguous_head_dim(std::int64_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

void check_dims(const AttentionDims& dims) {
  require(dims.n_tokens >= 0 && dims.n_q_heads > 0 && dims.n_kv_heads > 0 && dims.head_dim > 0 &&
              dims.capacity > 0,
          "attention: bad shape (tokens " + str(dims.n_tokens) + ", q heads " +
              str(dims.n_q_heads) + ", kv heads " + str(dims.n_kv_heads) + ", head_dim " +
              str(dims.head_dim) + ", capacity " + str(dims.capacity) + ")");
  require(dims.n_q_heads % dims.n_kv_heads == 0, "attention: " + str(dims.n_q_heads) +
                                                     " query heads are not a multiple of " +
                                                     str(dims.n_kv_heads) + " kv heads");
  require(dims.head_dim <= kMaxDimPerLane * kWarpSize, "attention: head_dim " + str(dims.head_dim) +
                                                           " above the supported " +
                                                           str(kMaxDimPerLane * kWarpSize));
  require(dims.n_tokens <= dims.capacity, "attention: " + str(dims.n_tokens) +
                                              " tokens exceed the cache capacity " +
                                              str(dims.capacity));
  require(dims.capacity <= 0x7fffffff, "attention: capacity " + str(dims.capacity) + " too large");
  require(dims.n_q_heads * kSmallBatch <= kCounterSlots,
          "attention: " + str(dims.n_q_heads) + " query heads per rank (at most " +
              str(kCounterSlots / kSmallBatch) + ")");
}

struct Workspace {
  float* o = nullptr;  // [pass tokens][heads][grid_splits][head_dim]
  float* m = nullptr;  // [pass tokens][heads][grid_splits]
  float* l = nullptr;
  unsigned* counters = nullptr;  // [pass tokens][heads], at the start of the workspace
};

struct Params {
  const float* q = nullptr;
  const void* k_cache = nullptr;  // elements of kv_dtype
  const void* v_cache = nullptr;
  DType kv_dtype = DType::kF32;
  const std::uint8_t* tree_mask = nullptr;
  const StepParams* step = nullptr;
  float* out = nullptr;
  std::int64_t n_tokens = 0;     // all tokens (mask width)
  std::int64_t token_begin = 0;  // first token of this pass
  std::int64_t n_heads = 0;
  std::int64_t group = 0;
  std::int64_t head_dim = 0;
  std::int64_t capacity = 0;
  std::int64_t grid_splits = 0;
  float scale = 1.0f;
};

// Lane `lane`'s dims of a head vector: d_j = lane * kDims + j (contiguous) or lane + 32 j.
template <int kDims, bool kContiguous>
__device__ __forceinline__ int lane_dim(int lane, int j) {
  return kContiguous ? lane * kDims + j : lane + j * kWarpSize;
}

template <int kDims, bool kContiguous>
__device__ __forceinline__ void load_head_vector(const float* row, int lane, std::int64_t head_dim,
                                                 float (&out)[kDims]) {
  if constexpr (kContiguous && kDims % 4 == 0) {
    const float4* p = reinterpret_cast<const float4*>(row + lane * kDims);
#pragma unroll
    for (int i = 0; i < kDims / 4; ++i) {
      const float4 v = __ldg(p + i);
      out[4 * i] = v.x;
      out[4 * i + 1] = v.y;
      out[4 * i + 2] = v.z;
      out[4 * i + 3] = v.w;
    }
  } else if constexpr (kContiguous && kDims == 2) {
    const float2 v = __ldg(reinterpret_cast<const float2*>(row + lane * kDims));
    out[0] = v.x;
    out[1] = v.y;
  } else {
#pragma unroll
    for (int j = 0; j < kDims; ++j) {
      const int d = lane_dim<kDims, kContiguous>(lane, j);
      out[j] = d < head_dim ? __ldg(row + d) : 0.0f;
    }
  }
}

// The same for a bf16 row: each 32-bit word holds two elements, the lower-addressed one in its low
// half; widening is a shift into the high half (exact).
__device__ __forceinline__ void widen_pair(unsigned word, float& first, float& second) {
  first = __uint_as_float(word << 16);
  second = __uint_as_float(word & 0xffff0000u);
}

template <int kDims, bool kContiguous>
__device__ __forceinline__ void load_head_vector(const std::uint16_t* row, int lane,
                                                 std::int64_t head_dim, float (&out)[kDims]) {
  if constexpr (kContiguous && kDims % 8 == 0) {
    const uint4* p = reinterpret_cast<const uint4*>(row + lane * kDims);
#pragma unroll
    for (int i = 0; i < kDims / 8; ++i) {
      const uint4 v = __ldg(p + i);
      widen_pair(v.x, out[8 * i], out[8 * i + 1]);
      widen_pair(v.y, out[8 * i + 2], out[8 * i + 3]);
      widen_pair(v.z, out[8 * i + 4], out[8 * i + 5]);
      widen_pair(v.w, out[8 * i + 6], out[8 * i + 7]);
    }
  } else if constexpr (kContiguous && kDims == 4) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(row + lane * kDims));
    widen_pair(v.x, out[0], out[1]);
    widen_pair(v.y, out[2], out[3]);
  } else if constexpr (kContiguous && kDims == 2) {
    widen_pair(__ldg(reinterpret_cast<const unsigned*>(row + lane * kDims)), out[0], out[1]);
  } else {
#pragma unroll
    for (int j = 0; j < kDims; ++j) {
      const int d = lane_dim<kDims, kContiguous>(lane, j);
      out[j] = d < head_dim ? bf16_bits_to_float(__ldg(row + d)) : 0.0f;
    }
  }
}

// The visible new slots of query t, as a list of new-token indices j (ascending), in shared
// memory, and their count. Causal: j = 0 .. t (no list). Tree: the set mask entries, found by warp
// 0 with ballots. Slots past the cache are never visible.
__device__ __forceinline__ int visible_new_slots(const Params& p, std::int64_t t,
                                                 std::int64_t n_past, int* s_new, int* s_count) {
  const std::int64_t room = p.capacity - n_past;  // new slots that fit the cache
  if (p.tree_mask == nullptr) {
    const std::int64_t n = t + 1 < room ? t + 1 : room;
    return n < 0 ? 0 : static_cast<int>(n);
  }
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (threadIdx.x < kWarpSize) {
    int count = 0;
    for (std::int64_t j0 = 0; j0 < p.n_tokens; j0 += kWarpSize) {
      const std::int64_t j = j0 + lane;
      const bool set = j < p.n_tokens && j < room && p.tree_mask[t * p.n_tokens + j] != 0;
      const unsigned ballot = __ballot_sync(kFullMask, set);
      if (set) s_new[count + __popc(ballot & ((1u << lane) - 1u))] = static_cast<int>(j);
      count += __popc(ballot);
    }
    if (lane == 0) *s_count = count;
  }
  __syncthreads();
  return *s_count;
}

// Rank -> cache slot of one query: its past slots, then its visible new slots in order.
struct VisibleSlots {
  std::int64_t n_past = 0;
  const int* new_slots = nullptr;  // tree: the visible new-token indices; nullptr: causal
  __device__ __forceinline__ std::int64_t slot(std::int64_t rank) const {
    if (rank < n_past) return rank;
    const std::int64_t j = rank - n_past;
    return n_past + (new_slots != nullptr ? new_slots[j] : j);
  }
};

// One warp's online softmax over its groups of 8 ranks of [r_begin, r_end) (ranks 8·warp,
// 8·warp + 32, ... from r_begin), in that order: the running max m, sum l and weighted values.
template <int kDims>
struct WarpSoftmax {
  float m = -INFINITY;
  float l = 0.0f;
  float acc[kDims] = {};
};

template <class Elem, int kDims, bool kContiguous>
__device__ __forceinline__ WarpSoftmax<kDims> warp_softmax(
    const Params& p, const float (&q_reg)[kDims], const Elem* k_head, const Elem* v_head,
    const VisibleSlots& visible, std::int64_t r_begin, std::int64_t r_end, int lane, int warp) {
  WarpSoftmax<kDims> w;
  for (std::int64_t g = r_begin + warp * kGroup; g < r_end; g += kWarps * kGroup) {
    std::int64_t slots[kGroup];
#pragma unroll
    for (int u = 0; u < kGroup; ++u) slots[u] = visible.slot(g + u < r_end ? g + u : r_end - 1);
    float keys[kGroup][kDims];
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      load_head_vector<kDims, kContiguous>(k_head + slots[u] * p.head_dim, lane, p.head_dim,
                                           keys[u]);
    }
    float score[kGroup];
    float group_max = -INFINITY;
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      float partial = 0.0f;
#pragma unroll
      for (int j = 0; j < kDims; ++j) partial = fmaf(q_reg[j], keys[u][j], partial);
      score[u] = detail::warp_sum(partial) * p.scale;  // every lane, used or not
      if (g + u < r_end) group_max = fmaxf(group_max, score[u]);
    }
    float values[kGroup][kDims];
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      load_head_vector<kDims, kContiguous>(v_head + slots[u] * p.head_dim, lane, p.head_dim,
                                           values[u]);
    }
    const float m_new = fmaxf(w.m, group_max);
    const float correction = expf(w.m - m_new);  // 0 for the first group (m = -inf)
    w.l *= correction;
#pragma unroll
    for (int j = 0; j < kDims; ++j) w.acc[j] *= correction;
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      if (g + u < r_end) {
        const float weight = expf(score[u] - m_new);
        w.l += weight;
#pragma unroll
        for (int j = 0; j < kDims; ++j) w.acc[j] = fmaf(weight, values[u][j], w.acc[j]);
      }
    }
    w.m = m_new;
  }
  return w;
}

// The block's warps combined in warp order (a warp with no rank has l = 0 and is left out): the
// split's max M, sum L, and each warp's factor expf(m_w − M) for A[d] = Σ factor_w acc_w[d].
struct SplitCombination {
  float m = -INFINITY;
  float l = 0.0f;
  float factor[kWarps] = {};
};

__device__ __forceinline__ SplitCombination combine_warps(const float (&s_m)[kWarps],
                                                          const float (&s_l)[kWarps]) {
  SplitCombination c;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    if (s_l[w] > 0.0f) c.m = fmaxf(c.m, s_m[w]);
  }
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    c.factor[w] = s_l[w] > 0.0f ? expf(s_m[w] - c.m) : 0.0f;
    c.l = fmaf(c.factor[w], s_l[w], c.l);
  }
  return c;
}

template <int kDims>
__device__ __forceinline__ float combined_value(const SplitCombination& c,
                                                const float (&s_acc)[kWarps][kDims * kWarpSize],
                                                std::int64_t d) {
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total = fmaf(c.factor[w], s_acc[w][d], total);
  return total;
}

// The last block of a query: its splits' partials merged in split order (read past L1, __ldcg:
// other blocks wrote them), out[d] = Σ_s expf(M_s − M*) A_s[d] / Σ_s expf(M_s − M*) L_s.
__device__ __forceinline__ void merge_splits(const Workspace& ws, std::int64_t first_unit,
                                             std::int64_t n_splits, std::int64_t head_dim,
                                             float* out) {
  float merged_m = -INFINITY;
  for (std::int64_t s = 0; s < n_splits; ++s) {
    merged_m = fmaxf(merged_m, __ldcg(ws.m + first_unit + s));
  }
  float merged_l = 0.0f;
  for (std::int64_t s = 0; s < n_splits; ++s) {
    merged_l = fmaf(expf(__ldcg(ws.m + first_unit + s) - merged_m), __ldcg(ws.l + first_unit + s),
                    merged_l);
  }
  for (std::int64_t d = threadIdx.x; d < head_dim; d += kThreads) {
    float total = 0.0f;
    for (std::int64_t s = 0; s < n_splits; ++s) {
      const float f = expf(__ldcg(ws.m + first_unit + s) - merged_m);
      total = fmaf(f, __ldcg(ws.o + (first_unit + s) * head_dim + d), total);
    }
    out[d] = total / merged_l;
  }
}

template <class Elem, int kDims, bool kContiguous>
__global__ void __launch_bounds__(kThreads) attention_kernel(const Params p, const Workspace ws) {
  __shared__ int s_new[kMaxTreeTokens];
  __shared__ int s_count;
  __shared__ float s_m[kWarps];
  __shared__ float s_l[kWarps];
  __shared__ float s_acc[kWarps][kDims * kWarpSize];
  __shared__ bool s_last;

  detail::allow_dependents();
  detail::wait_for_prerequisites();
  const auto block = static_cast<std::int64_t>(blockIdx.x);
  const std::int64_t split = block % p.grid_splits;
  const std::int64_t pair = block / p.grid_splits;  // local token * heads + head
  const std::int64_t h = pair % p.n_heads;
  const std::int64_t t = p.token_begin + pair / p.n_heads;
  const std::int64_t stored_past = p.step->n_past;
  const std::int64_t n_past = stored_past < p.capacity ? stored_past : p.capacity;
  const int n_new = visible_new_slots(p, t, n_past, s_new, &s_count);  // block-uniform
  const std::int64_t n_visible = n_past + n_new;
  float* out = p.out + (t * p.n_heads + h) * p.head_dim;
  if (n_visible == 0) {
    if (split == 0) {
      for (std::int64_t d = threadIdx.x; d < p.head_dim; d += kThreads) out[d] = 0.0f;
    }
    return;
  }
  const std::int64_t size = attention_split_slots(n_visible);
  const std::int64_t n_splits = (n_visible + size - 1) / size;
  if (split >= n_splits) return;  // block-uniform, after the only barrier so far
  const std::int64_t r_begin = split * size;
  const std::int64_t r_end = r_begin + size < n_visible ? r_begin + size : n_visible;
  const VisibleSlots visible{n_past, p.tree_mask != nullptr ? s_new : nullptr};

  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const std::int64_t head_stride = p.capacity * p.head_dim;
  const std::int64_t kv_offset = (h / p.group) * head_stride;
  float q_reg[kDims];
  load_head_vector<kDims, kContiguous>(p.q + (t * p.n_heads + h) * p.head_dim, lane, p.head_dim,
                                       q_reg);
  const WarpSoftmax<kDims> mine = warp_softmax<Elem, kDims, kContiguous>(
      p, q_reg, static_cast<const Elem*>(p.k_cache) + kv_offset,
      static_cast<const Elem*>(p.v_cache) + kv_offset, visible, r_begin, r_end, lane, warp);

  if (lane == 0) {
    s_m[warp] = mine.m;
    s_l[warp] = mine.l;
  }
#pragma unroll
  for (int j = 0; j < kDims; ++j) s_acc[warp][lane_dim<kDims, kContiguous>(lane, j)] = mine.acc[j];
  __syncthreads();
  const SplitCombination c = combine_warps(s_m, s_l);
  if (n_splits == 1) {
    for (std::int64_t d = threadIdx.x; d < p.head_dim; d += kThreads) {
      out[d] = combined_value<kDims>(c, s_acc, d) / c.l;
    }
    return;
  }

  // Several splits: this split's partial to the workspace; the last block merges.
  const std::int64_t first_unit = pair * p.grid_splits;
  const std::int64_t unit = first_unit + split;
  for (std::int64_t d = threadIdx.x; d < p.head_dim; d += kThreads) {
    ws.o[unit * p.head_dim + d] = combined_value<kDims>(c, s_acc, d);
  }
  if (threadIdx.x == 0) {
    ws.m[unit] = c.m;
    ws.l[unit] = c.l;
  }
  __threadfence();  // the partial is visible device-wide before the counter says so
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned done = atomicAdd(ws.counters + pair, 1u);
    s_last = done + 1 == static_cast<unsigned>(n_splits);
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  if (threadIdx.x == 0) ws.counters[pair] = 0;  // ready for the next launch
  merge_splits(ws, first_unit, n_splits, p.head_dim, out);
}

template <class Elem, int kDims, bool kContiguous>
void launch_kernel(const Params& p, const Workspace& ws, std::int64_t pass_tokens,
                   cudaStream_t stream) {
  const std::int64_t blocks = pass_tokens * p.n_heads * p.grid_splits;
  detail::launch_dependent(attention_kernel<Elem, kDims, kContiguous>,
                           dim3(static_cast<unsigned>(blocks)), dim3(kThreads), stream, p, ws);
}

template <class Elem>
void launch_pass(const Params& p, const Workspace& ws, std::int64_t pass_tokens,
                 cudaStream_t stream) {
  switch (p.head_dim) {
    case 64:
      return launch_kernel<Elem, 2, true>(p, ws, pass_tokens, stream);
    case 128:
      return launch_kernel<Elem, 4, true>(p, ws, pass_tokens, stream);
    case 256:
      return launch_kernel<Elem, 8, true>(p, ws, pass_tokens, stream);
    default:
      break;
  }
  const std::int64_t per_lane = (p.head_dim + kWarpSize - 1) / kWarpSize;
  if (per_lane <= 1) return launch_kernel<Elem, 1, false>(p, ws, pass_tokens, stream);
  if (per_lane <= 2) return launch_kernel<Elem, 2, false>(p, ws, pass_tokens, stream);
  if (per_lane <= 4) return launch_kernel<Elem, 4, false>(p, ws, pass_tokens, stream);
  return launch_kernel<Elem, kMaxDimPerLane, false>(p, ws, pass_tokens, stream);
}

}  // namespace

std::size_t attention_workspace_bytes(const AttentionDims& dims) {
  check_dims(dims);
  const Geometry g = geometry(dims);
  return kCounterBytes + (g.o_floats + 2 * g.ml_floats) * sizeof(float);
}

void attention(const float* q, const void* k_cache, const void* v_cache, const AttentionDims& dims,
               const StepParams* step, const std::uint8_t* tree_mask, float scale, float* out,
               void* workspace, cudaStream_t stream) {
  check_dims(dims);
  if (dims.n_tokens == 0) return;
  require(q != nullptr && k_cache != nullptr && v_cache != nullptr && out != nullptr &&
              step != nullptr && workspace != nullptr,
          "attention: null pointer");
  require(detail::is_aligned(workspace, sizeof(float)), "attention: misaligned workspace");
  detail::require_kv_dtype("attention", dims.kv_dtype);
  require(tree_mask == nullptr || dims.n_tokens <= kMaxTreeTokens,
          "attention: a tree mask over " + str(dims.n_tokens) + " tokens (at most " +
              str(kMaxTreeTokens) + ")");
  if (contiguous_head_dim(dims.head_dim)) {
    require(detail::is_aligned(q, 16) && detail::is_aligned(k_cache, 16) &&
                detail::is_aligned(v_cache, 16) && detail::is_aligned(out, 16),
            "attention: q, the cache and out must be 16-byte aligned for head_dim " +
                str(dims.head_dim));
  }
  const Geometry g = geometry(dims);
  require(g.tokens_per_pass * dims.n_q_heads * g.grid_splits <= 0x7fffffff,
          "attention: too many (token, head, split) blocks for one launch");

  Workspace ws;
  ws.counters = static_cast<unsigned*>(workspace);
  ws.o = reinterpret_cast<float*>(static_cast<std::uint8_t*>(workspace) + kCounterBytes);
  ws.m = ws.o + g.o_floats;
  ws.l = ws.m + g.ml_floats;

  Params p;
  p.q = q;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.kv_dtype = dims.kv_dtype;
  p.tree_mask = tree_mask;
  p.step = step;
  p.out = out;
  p.n_tokens = dims.n_tokens;
  p.n_heads = dims.n_q_heads;
  p.group = dims.n_q_heads / dims.n_kv_heads;
  p.head_dim = dims.head_dim;
  p.capacity = dims.capacity;
  p.grid_splits = g.grid_splits;
  p.scale = scale;

  for (std::int64_t begin = 0; begin < dims.n_tokens; begin += g.tokens_per_pass) {
    const std::int64_t pass_tokens =
        dims.n_tokens - begin < g.tokens_per_pass ? dims.n_tokens - begin : g.tokens_per_pass;
    p.token_begin = begin;
    if (p.kv_dtype == DType::kBF16) {
      launch_pass<std::uint16_t>(p, ws, pass_tokens, stream);
    } else {
      launch_pass<float>(p, ws, pass_tokens, stream);
    }
  }
}

}  // namespace selfspec::kernels::cuda
