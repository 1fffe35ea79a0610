// Scaled dot-product attention over the KV cache, flash-decoding style (semantics of
// kernels/cpu/attention.hpp; n_past read from StepParams in device memory).
//
// Query t of head h (KV head h / group) sees the slots [0, n_past) and the new slots n_past + j
// the mask allows (causal: j <= t; tree: mask[t][j] != 0). The cache slots are cut into fixed
// chunks of kAttentionChunk = 256 absolute slot positions, so a query's chunks — and everything
// computed from them — depend only on its visible slots, not on T or on n_past separately.
//
// Kernel 1 (chunk partials): one block of 256 threads (8 warps) per (token, head, chunk), grid
// flattened into x. Chunks starting after the query's last visible slot exit at once (the grid is
// sized by the cache capacity, so a captured graph serves any n_past). Inside a chunk, warp w
// handles the groups of 8 consecutive slots g ≡ w (mod 8), ascending, i.e. slots
// 64m + 8w + u, up to the chunk's last visible slot (groups wholly past it are skipped: they
// add nothing); the lanes split head_dim (d = lane + 32j). A warp issues the K (then V) loads of
// its 8 slots together, so a decode step with few chunks (one block per head at short context)
// waits on 4 memory round trips per phase, not 16:
//   1. scores: s = (Σ_d q[d] k[d], per lane an fmaf chain in ascending j, then an xor butterfly)
//      * scale; invisible slots get -inf (their K rows are not used: the loads read a clamped
//      valid slot and the result is discarded, so garbage or NaN there cannot leak in);
//   2. m = the chunk's max score (block max through shared memory, exact);
//   3. per warp: p = expf(s − m), l_w = Σ p and acc_w[d] = Σ p · v[d] (fmaf), in the warp's slot
//      order; the 8 warps' (l_w, acc_w) are then added in warp order 0..7.
//   The partial (m, l, acc) of each (token, head, chunk) goes to the workspace; an empty chunk
//   (tree mask hiding all of its slots) stores l = 0.
// Kernel 2 (merge): one block of 256 threads per (token, head). Over the chunks 0 .. last/256
// in ascending order: M = max m_c (chunks with l_c > 0), L = Σ expf(m_c − M) l_c, out[d] =
// (Σ expf(m_c − M) acc_c[d]) / L. A query with no visible slot gets zeros.
// Everything is f32 except the flattened indices; the result differs from the CPU's (double
// denominator, normalise-then-sum) by rounding only.
//
// Workspace: partials for `tokens_per_pass` tokens; longer inputs (prefill) are processed in
// passes of that many tokens (launch pairs on the same stream). tokens_per_pass is a function of
// the dims alone, so attention_workspace_bytes() and attention() agree.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace selfspec::kernels::cuda {
namespace {

using detail::kWarpSize;
using detail::require;
using detail::str;

constexpr int kChunk = static_cast<int>(kAttentionChunk);
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kGroup = 8;          // consecutive slots a warp handles together
constexpr int kMaxDimPerLane = 8;  // head_dim <= 256
static_assert(kChunk % (kWarps * kGroup) == 0, "the chunk must split evenly over the warps");

// The workspace budget that limits the tokens per pass (verification batches always fit).
constexpr std::size_t kWorkspaceBudget = std::size_t{64} << 20;

struct Geometry {
  std::int64_t max_chunks = 0;       // ceil(capacity / chunk)
  std::int64_t tokens_per_pass = 0;  // tokens whose partials fit the workspace at once
  std::size_t o_floats = 0;          // partial outputs, [pass tokens][heads][chunks][head_dim]
  std::size_t ml_floats = 0;         // partial m and l, [pass tokens][heads][chunks] each
};

Geometry geometry(const AttentionDims& dims) {
  Geometry g;
  g.max_chunks = (dims.capacity + kChunk - 1) / kChunk;
  const std::size_t per_token = static_cast<std::size_t>(dims.n_q_heads) *
                                static_cast<std::size_t>(g.max_chunks) *
                                static_cast<std::size_t>(dims.head_dim + 2) * sizeof(float);
  std::int64_t fit =
      per_token == 0 ? dims.n_tokens : static_cast<std::int64_t>(kWorkspaceBudget / per_token);
  if (fit < kSmallBatch) fit = kSmallBatch;
  g.tokens_per_pass = dims.n_tokens < fit ? dims.n_tokens : fit;
  const std::size_t units = static_cast<std::size_t>(g.tokens_per_pass) *
                            static_cast<std::size_t>(dims.n_q_heads) *
                            static_cast<std::size_t>(g.max_chunks);
  g.o_floats = units * static_cast<std::size_t>(dims.head_dim);
  g.ml_floats = units;
  return g;
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
}

// The query's last visible slot (n_past - 1 when it sees no new slot; -1 when nothing at all),
// clamped below the capacity. Identical code in both kernels.
__device__ __forceinline__ std::int64_t last_visible_slot(std::int64_t t, std::int64_t n_past,
                                                          std::int64_t n_tokens,
                                                          std::int64_t capacity,
                                                          const std::uint8_t* tree_mask) {
  std::int64_t last = n_past - 1;
  if (tree_mask == nullptr) {
    last = n_past + t;
  } else {
    for (std::int64_t j = n_tokens - 1; j >= 0; --j) {
      if (tree_mask[t * n_tokens + j] != 0) {
        last = n_past + j;
        break;
      }
    }
  }
  return last < capacity - 1 ? last : capacity - 1;
}

__device__ __forceinline__ bool slot_visible(std::int64_t slot, std::int64_t t, std::int64_t n_past,
                                             std::int64_t n_tokens, const std::uint8_t* tree_mask) {
  if (slot < n_past) return true;
  const std::int64_t j = slot - n_past;
  if (j >= n_tokens) return false;
  return tree_mask == nullptr ? j <= t : tree_mask[t * n_tokens + j] != 0;
}

struct Partials {
  float* o = nullptr;  // [pass tokens][heads][max_chunks][head_dim]
  float* m = nullptr;  // [pass tokens][heads][max_chunks]
  float* l = nullptr;
};

struct Params {
  const float* q = nullptr;
  const float* k_cache = nullptr;
  const float* v_cache = nullptr;
  const std::uint8_t* tree_mask = nullptr;
  const StepParams* step = nullptr;
  float* out = nullptr;
  std::int64_t n_tokens = 0;     // all tokens (mask width)
  std::int64_t token_begin = 0;  // first token of this pass
  std::int64_t n_heads = 0;
  std::int64_t group = 0;
  std::int64_t head_dim = 0;
  std::int64_t capacity = 0;
  std::int64_t max_chunks = 0;
  float scale = 1.0f;
};

template <int kDimPerLane>
__global__ void __launch_bounds__(kThreads)
    attention_chunk_kernel(const Params p, const Partials partials) {
  __shared__ float s_score[kChunk];
  __shared__ float s_max[kWarps];
  __shared__ float s_sum[kWarps];
  __shared__ float s_acc[kWarps][kDimPerLane * kWarpSize];

  const std::int64_t block = blockIdx.x;
  const std::int64_t chunk = block % p.max_chunks;
  const std::int64_t pair = block / p.max_chunks;  // local token * heads + head
  const std::int64_t h = pair % p.n_heads;
  const std::int64_t t = p.token_begin + pair / p.n_heads;
  const std::int64_t n_past = p.step->n_past;
  const std::int64_t last = last_visible_slot(t, n_past, p.n_tokens, p.capacity, p.tree_mask);
  const std::int64_t begin = chunk * kChunk;
  if (begin > last) return;  // block-uniform, before any barrier

  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const std::int64_t kv_head = h / p.group;
  const std::int64_t head_stride = p.capacity * p.head_dim;
  const float* k_head = p.k_cache + kv_head * head_stride;
  const float* v_head = p.v_cache + kv_head * head_stride;
  const float* q_vec = p.q + (t * p.n_heads + h) * p.head_dim;
  // Slots [begin, begin + span) hold every visible slot of the chunk (warp-uniform bound).
  const int span = last - begin + 1 < kChunk ? static_cast<int>(last - begin + 1) : kChunk;

  float q_reg[kDimPerLane];
#pragma unroll
  for (int j = 0; j < kDimPerLane; ++j) {
    const std::int64_t d = lane + j * kWarpSize;
    q_reg[j] = d < p.head_dim ? q_vec[d] : 0.0f;
  }

  // 1. scores
  float warp_max = -INFINITY;
  for (int g = warp * kGroup; g < span; g += kWarps * kGroup) {
    bool visible[kGroup];
    const float* k_rows[kGroup];
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      const std::int64_t slot = begin + g + u;
      visible[u] = slot <= last && slot_visible(slot, t, n_past, p.n_tokens, p.tree_mask);
      k_rows[u] = k_head + (slot <= last ? slot : last) * p.head_dim;  // always a valid slot
    }
    float dot[kGroup];
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      float partial = 0.0f;
#pragma unroll
      for (int j = 0; j < kDimPerLane; ++j) {
        const std::int64_t d = lane + j * kWarpSize;
        if (d < p.head_dim) partial = fmaf(q_reg[j], k_rows[u][d], partial);
      }
      dot[u] = partial;
    }
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      const float total = detail::warp_sum(dot[u]);  // every lane, visible or not
      const float score = visible[u] ? total * p.scale : -INFINITY;
      if (lane == 0) s_score[g + u] = score;
      warp_max = fmaxf(warp_max, score);
    }
  }
  if (lane == 0) s_max[warp] = warp_max;
  __syncthreads();  // s_score and s_max complete
  float m = s_max[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, s_max[w]);

  // 3. exp, sum and weighted values over the warp's own slots
  float acc[kDimPerLane];
#pragma unroll
  for (int j = 0; j < kDimPerLane; ++j) acc[j] = 0.0f;
  float sum = 0.0f;
  if (m != -INFINITY) {  // block-uniform: some slot of the chunk is visible
    for (int g = warp * kGroup; g < span; g += kWarps * kGroup) {
      float weight[kGroup];
      const float* v_rows[kGroup];
#pragma unroll
      for (int u = 0; u < kGroup; ++u) {
        const std::int64_t slot = begin + g + u;
        const float score = s_score[g + u];
        weight[u] = score == -INFINITY ? 0.0f : expf(score - m);
        v_rows[u] = v_head + (slot <= last ? slot : last) * p.head_dim;
      }
#pragma unroll
      for (int u = 0; u < kGroup; ++u) {
        const bool used = s_score[g + u] != -INFINITY;
        if (used) sum += weight[u];
#pragma unroll
        for (int j = 0; j < kDimPerLane; ++j) {
          const std::int64_t d = lane + j * kWarpSize;
          if (d < p.head_dim) {
            const float v = v_rows[u][d];
            acc[j] = used ? fmaf(weight[u], v, acc[j]) : acc[j];
          }
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kDimPerLane; ++j) s_acc[warp][lane + j * kWarpSize] = acc[j];
  if (lane == 0) s_sum[warp] = sum;
  __syncthreads();  // s_acc and s_sum complete

  const std::int64_t unit = pair * p.max_chunks + chunk;
  float* o = partials.o + unit * p.head_dim;
  for (std::int64_t d = threadIdx.x; d < p.head_dim; d += kThreads) {
    float total = s_acc[0][d];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) total += s_acc[w][d];
    o[d] = total;
  }
  if (threadIdx.x == 0) {
    float total = s_sum[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) total += s_sum[w];
    partials.m[unit] = m;
    partials.l[unit] = total;
  }
}

__global__ void __launch_bounds__(kThreads)
    attention_merge_kernel(const Params p, const Partials partials) {
  const std::int64_t pair = blockIdx.x;  // local token * heads + head
  const std::int64_t h = pair % p.n_heads;
  const std::int64_t t = p.token_begin + pair / p.n_heads;
  const std::int64_t n_past = p.step->n_past;
  const std::int64_t last = last_visible_slot(t, n_past, p.n_tokens, p.capacity, p.tree_mask);
  float* out = p.out + (t * p.n_heads + h) * p.head_dim;
  const std::int64_t n_chunks = last < 0 ? 0 : last / kChunk + 1;  // <= max_chunks
  const std::int64_t first_unit = pair * p.max_chunks;

  float big_m = -INFINITY;
  for (std::int64_t c = 0; c < n_chunks; ++c) {
    if (partials.l[first_unit + c] > 0.0f) big_m = fmaxf(big_m, partials.m[first_unit + c]);
  }
  float big_l = 0.0f;
  if (big_m != -INFINITY) {
    for (std::int64_t c = 0; c < n_chunks; ++c) {
      const float l = partials.l[first_unit + c];
      if (l > 0.0f) big_l = fmaf(expf(partials.m[first_unit + c] - big_m), l, big_l);
    }
  }
  for (std::int64_t d = threadIdx.x; d < p.head_dim; d += kThreads) {
    if (!(big_l > 0.0f)) {
      out[d] = 0.0f;
      continue;
    }
    float total = 0.0f;
    for (std::int64_t c = 0; c < n_chunks; ++c) {
      const float l = partials.l[first_unit + c];
      if (l > 0.0f) {
        const float factor = expf(partials.m[first_unit + c] - big_m);
        total = fmaf(factor, partials.o[(first_unit + c) * p.head_dim + d], total);
      }
    }
    out[d] = total / big_l;
  }
}

template <int kDimPerLane>
void launch_chunks(const Params& p, const Partials& partials, std::int64_t pass_tokens,
                   cudaStream_t stream) {
  const std::int64_t blocks = pass_tokens * p.n_heads * p.max_chunks;
  attention_chunk_kernel<kDimPerLane>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p, partials);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

}  // namespace

std::size_t attention_workspace_bytes(const AttentionDims& dims) {
  check_dims(dims);
  const Geometry g = geometry(dims);
  return (g.o_floats + 2 * g.ml_floats) * sizeof(float);
}

void attention(const float* q, const float* k_cache, const float* v_cache,
               const AttentionDims& dims, const StepParams* step, const std::uint8_t* tree_mask,
               float scale, float* out, void* workspace, cudaStream_t stream) {
  check_dims(dims);
  if (dims.n_tokens == 0) return;
  require(q != nullptr && k_cache != nullptr && v_cache != nullptr && out != nullptr &&
              step != nullptr && workspace != nullptr,
          "attention: null pointer");
  require(detail::is_aligned(workspace, sizeof(float)), "attention: misaligned workspace");
  const Geometry g = geometry(dims);
  require(g.tokens_per_pass * dims.n_q_heads * g.max_chunks <= 0x7fffffff,
          "attention: too many (token, head, chunk) blocks for one launch");

  Partials partials;
  partials.o = static_cast<float*>(workspace);
  partials.m = partials.o + g.o_floats;
  partials.l = partials.m + g.ml_floats;

  Params p;
  p.q = q;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.tree_mask = tree_mask;
  p.step = step;
  p.out = out;
  p.n_tokens = dims.n_tokens;
  p.n_heads = dims.n_q_heads;
  p.group = dims.n_q_heads / dims.n_kv_heads;
  p.head_dim = dims.head_dim;
  p.capacity = dims.capacity;
  p.max_chunks = g.max_chunks;
  p.scale = scale;

  const std::int64_t per_lane = (dims.head_dim + kWarpSize - 1) / kWarpSize;
  for (std::int64_t begin = 0; begin < dims.n_tokens; begin += g.tokens_per_pass) {
    const std::int64_t pass_tokens =
        dims.n_tokens - begin < g.tokens_per_pass ? dims.n_tokens - begin : g.tokens_per_pass;
    p.token_begin = begin;
    if (per_lane <= 1) {
      launch_chunks<1>(p, partials, pass_tokens, stream);
    } else if (per_lane <= 2) {
      launch_chunks<2>(p, partials, pass_tokens, stream);
    } else if (per_lane <= 4) {
      launch_chunks<4>(p, partials, pass_tokens, stream);
    } else {
      launch_chunks<kMaxDimPerLane>(p, partials, pass_tokens, stream);
    }
    attention_merge_kernel<<<static_cast<unsigned>(pass_tokens * dims.n_q_heads), kThreads, 0,
                             stream>>>(p, partials);
    SELFSPEC_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace selfspec::kernels::cuda
