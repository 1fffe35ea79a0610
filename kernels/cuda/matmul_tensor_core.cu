// The tensor-core GEMV: y[t][n] = Σ_k x[t][k] · w[n][k] for bf16 weights and T <= kSmallBatch
// tokens, on mma.sync.m16n8k16 (bf16 operands, f32 accumulators). Why: the CUDA-core GEMV loads
// each activation once per lane and per 4 rows and holds kRows × T accumulators, so its cost grows
// with T (the second GPU run: 4096 x 4096 at T = 16 took 2.8x T = 1; v(7) was 2.5); a tensor core
// multiplies a 16-token tile by 8 rows in one instruction, so up to 16 tokens cost one weight
// stream, and 64 cost four small tiles of the same stream.
//
// f32 activations on bf16 tensor cores: each x is split into three bf16 parts (hi + mid + lo == x
// exactly, kernels/shared_math.hpp's split_to_bf16_parts) and each part multiplied in its own
// mma; bf16 × bf16 products are exact in f32, so the weights meet all 24 bits of x, and the
// result is as close to the exact product as an f32 loop's (the GPU tests hold it to the CPU
// matmul within 1e-5 of Σ|x·w|).
//
// The canonical order, fixed by cols alone (token-count invariance, the property lossless
// self-speculation rests on): the k axis is cut into chunks of 32 (two mma steps; the lanes'
// k numbering is kernels/cuda/mma_layout.hpp's), chunk c belongs to split c mod kSplits, each
// split's chunks accumulate in ascending order into one f32 accumulator per output (per chunk:
// step 0 then step 1, each hi, mid, lo), and the kSplits split sums are added in ascending split
// order. An output's accumulator depends only on its own token's activations and its own weight
// row (a tensor core computes every element of D from its row of A and its column of B alone), so
// y[t][n] does not depend on T, on where the token sits in its 16-token tile, on how many rows a
// block holds, on the matrices sharing the launch, or on vector or scalar loads. The GPU tests
// check this bit for bit (T = 1 .. 64 against T = 1, fused against single launches). The tensor
// core's own summation inside one mma is not specified to the bit by the PTX ISA, so this kernel
// has no bit-exact scalar reference: its reference is the CPU matmul, within the bound above, and
// the CUDA-core GEMV (SELFSPEC_CUDA_GEMV=cuda-cores) remains the path with one.
//
// Launch: a block is kSplits = 8 warps (warp w computes split w: a fixed-order split-K inside the
// block, so a 4096-row matrix still gives 256 blocks of 8 warps) over 8 · kRowTiles rows (16;
// the SwiGLU form holds 8 gate rows and the up rows of the same indices) and all the launch's
// tokens in kTokenTiles tiles of 16 (up to 8 tokens, the tile's upper half is neither loaded nor
// split). A warp gets its chunks of weights through one of the pipelines (TensorPipeline, the
// same chunks in the same order, so the same bits): kLoadsInFlight 16-byte loads in flight in a
// register ring (the default) or in two ping-pong buffers, or stages of whole row stretches that
// the copy engine puts in shared memory (kBulk, sm_90); the first weights are asked for before
// the programmatic-dependent-launch wait, and register loads skip L1. Each warp reads activations
// through L1 (every block reads the same ones), splits each pair into three bf16x2 registers
// (cvt.rn.bf16x2.f32: the rounding of split_to_bf16_parts), and leaves its split sums in shared
// memory; then the block adds them in split order and stores (SwiGLU: swiglu_value(gate, up),
// the SwiGLU kernel's expression).
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/matmul_segments.cuh"
#include "kernels/cuda/matmul_tensor_core.hpp"
#include "kernels/cuda/mma_layout.hpp"
#include "kernels/shared_math.hpp"  // swiglu_value

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace selfspec::kernels::cuda::detail {
namespace {

constexpr int kSplits = 8;  // warps per block, and splits of the k axis (part of the order)
constexpr int kThreads = kSplits * kWarpSize;
constexpr int kParts = 3;  // bf16 parts of an activation
constexpr int kSteps = mma::kChunk / mma::kStepK;
// Weight loads in flight per lane: kDepth chunks × matrices × row tiles of 16 bytes.
constexpr int kLoadsInFlight = 8;

// The lane's 16-byte group of weight row `row` at element k0 (zeros past the rows and the
// columns; the same values with vector or element loads). Weights are read once per forward:
// they skip L1, which keeps the activations.
__device__ __forceinline__ uint4 load_weight_group(const std::uint16_t* __restrict__ w,
                                                   std::int64_t rows, std::int64_t cols,
                                                   std::int64_t row, std::int64_t k0,
                                                   bool vector_loads) {
  uint4 out = make_uint4(0u, 0u, 0u, 0u);
  if (row >= rows || k0 >= cols) return out;
  const std::uint16_t* p = w + row * cols + k0;
  if (vector_loads) {  // cols % 8 == 0: the group is whole
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(out.x), "=r"(out.y), "=r"(out.z), "=r"(out.w)
        : "l"(p));
    return out;
  }
  unsigned words[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int e = 0; e < mma::kGroupElements; ++e) {
    if (k0 + e < cols) {
      const unsigned bits = __ldg(reinterpret_cast<const unsigned short*>(p + e));
      words[e / 2] |= bits << (16 * (e % 2));
    }
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

// The lane's 8 activations of token `token` at element k0 (zeros past the tokens and columns).
__device__ __forceinline__ void load_activation_group(const float* __restrict__ x,
                                                      std::int64_t n_tokens, std::int64_t cols,
                                                      std::int64_t token, std::int64_t k0,
                                                      bool vector_loads, float (&out)[8]) {
#pragma unroll
  for (int e = 0; e < mma::kGroupElements; ++e) out[e] = 0.0f;
  if (token >= n_tokens || k0 >= cols) return;
  const float* p = x + token * cols + k0;
  if (vector_loads) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    const float4 b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    out[0] = a.x;
    out[1] = a.y;
    out[2] = a.z;
    out[3] = a.w;
    out[4] = b.x;
    out[5] = b.y;
    out[6] = b.z;
    out[7] = b.w;
    return;
  }
#pragma unroll
  for (int e = 0; e < mma::kGroupElements; ++e) {
    if (k0 + e < cols) out[e] = __ldg(p + e);
  }
}

// d += a · b on the tensor cores (16 × 8 × 16, bf16 inputs, f32 accumulators).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4],
                                         const unsigned (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // never launched: tensor_core_gemv_enabled() requires compute capability 8.0
#endif
}

// Two activations (x0 at the lower k) as one bf16x2 register, rounded to nearest even by the
// hardware (cvt.rn.bf16x2.f32: the rounding of kernels/shared_math.hpp's float_to_bf16_bits for
// every value but NaN), x0 in the low half as the mma reads it.
__device__ __forceinline__ unsigned pack_bf16x2(float x0, float x1) {
  unsigned packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(x1), "f"(x0));
  return packed;
}
__device__ __forceinline__ float low_half(unsigned packed) {
  return __uint_as_float(packed << 16);
}
__device__ __forceinline__ float high_half(unsigned packed) {
  return __uint_as_float(packed & 0xffff0000u);
}

// The three bf16 parts of two activations, as split_to_bf16_parts (kernels/shared_math.hpp)
// makes them: part[0] = hi, part[1] = mid, part[2] = lo, each a bf16x2 register.
__device__ __forceinline__ void split_pair(float x0, float x1, unsigned (&part)[kParts]) {
  part[0] = pack_bf16x2(x0, x1);
  const float rest0 = __fsub_rn(x0, low_half(part[0]));
  const float rest1 = __fsub_rn(x1, high_half(part[0]));
  part[1] = pack_bf16x2(rest0, rest1);
  part[2] = pack_bf16x2(__fsub_rn(rest0, low_half(part[1])), __fsub_rn(rest1, high_half(part[1])));
}

// The A operands (activation parts) of one 16-token tile for both steps of a chunk, from the
// lane's groups of tokens `group` (lower) and `group + 8` (upper; all zero unless kUpper). The
// elements 2i and 2i + 1 of a group share a register (mma_layout.hpp; kernels_test checks it).
template <bool kUpper>
__device__ __forceinline__ void activation_operands(const float (&lower)[8],
                                                    const float (&upper)[8],
                                                    unsigned (&a)[kParts][kSteps][4]) {
#pragma unroll
  for (int p = 0; p < kParts; ++p) {
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
#pragma unroll
      for (int r = 0; r < 4; ++r) a[p][s][r] = 0u;
    }
  }
#pragma unroll
  for (int u = 0; u < (kUpper ? 2 : 1); ++u) {
#pragma unroll
    for (int e = 0; e < mma::kGroupElements; e += 2) {
      unsigned part[kParts];
      if (u == 0) {
        split_pair(lower[e], lower[e + 1], part);
      } else {
        split_pair(upper[e], upper[e + 1], part);
      }
      const mma::Slot slot = mma::a_slot(e, u);
#pragma unroll
      for (int p = 0; p < kParts; ++p) a[p][slot.step][slot.reg] = part[p];
    }
  }
}

// Register `reg` of step `step` of a lane's weight group: a word of the 16-byte load, as loaded.
__device__ __forceinline__ unsigned weight_word(const uint4& v, int step, int reg) {
  const int word = mma::b_word(step, reg);
  return word == 0 ? v.x : (word == 1 ? v.y : (word == 2 ? v.z : v.w));
}

// The norm's weight over the lane's group (zeros past the columns), as load_activation_group.
__device__ __forceinline__ void load_norm_group(const float* __restrict__ g, std::int64_t cols,
                                                std::int64_t k0, bool vector_loads,
                                                float (&out)[8]) {
  load_activation_group(g, 1, cols, 0, k0, vector_loads, out);
}

// RMSNorm folded into the product (Form::norm): the group's squares go into the token's sum of
// squares (ascending elements, fmaf), and the activation becomes g · x (rounded), whose product
// the epilogue scales by the token's 1 / rms.
__device__ __forceinline__ void fold_norm(const float (&g)[8], float (&values)[8],
                                          float& sum_squares) {
#pragma unroll
  for (int e = 0; e < mma::kGroupElements; ++e) {
    sum_squares = fmaf(values[e], values[e], sum_squares);
    values[e] = __fmul_rn(g[e], values[e]);
  }
}

// One chunk into the accumulators: per token tile, both steps, each part in order hi, mid, lo.
template <class Form, int kTokenTiles, bool kUpper, int kMats, int kRowTiles>
__device__ __forceinline__ void accumulate_chunk(const float* __restrict__ x,
                                                 const float* __restrict__ norm_weight,
                                                 std::int64_t n_tokens, std::int64_t cols,
                                                 std::int64_t k0, int group, bool vector_loads,
                                                 const uint4 (&w)[kMats][kRowTiles],
                                                 float (&acc)[kTokenTiles][kMats][kRowTiles][4],
                                                 float (&sum_squares)[kTokenTiles][2]) {
  float g[8];
  if constexpr (Form::norm) load_norm_group(norm_weight, cols, k0, vector_loads, g);
#pragma unroll
  for (int tt = 0; tt < kTokenTiles; ++tt) {
    float lower[8];
    float upper[8];
    const std::int64_t token = std::int64_t{tt} * mma::kTileTokens + group;
    load_activation_group(x, n_tokens, cols, token, k0, vector_loads, lower);
    if constexpr (Form::norm) fold_norm(g, lower, sum_squares[tt][0]);
    if constexpr (kUpper) {
      load_activation_group(x, n_tokens, cols, token + 8, k0, vector_loads, upper);
      if constexpr (Form::norm) fold_norm(g, upper, sum_squares[tt][1]);
    }
    unsigned a[kParts][kSteps][4];
    activation_operands<kUpper>(lower, upper, a);
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
#pragma unroll
      for (int p = 0; p < kParts; ++p) {
#pragma unroll
        for (int m = 0; m < kMats; ++m) {
#pragma unroll
          for (int j = 0; j < kRowTiles; ++j) {
            const unsigned b[2] = {weight_word(w[m][j], s, 0), weight_word(w[m][j], s, 1)};
            mma_bf16(acc[tt][m][j], a[p][s], b);
          }
        }
      }
    }
  }
}

template <int kMats, int kRowTiles>
__device__ __forceinline__ void load_weights(const std::uint16_t* const (&w)[kMats],
                                             std::int64_t rows, std::int64_t cols,
                                             std::int64_t row0, std::int64_t chunk,
                                             std::int64_t n_chunks, int lane, bool vector_loads,
                                             uint4 (&out)[kMats][kRowTiles]) {
  const std::int64_t k0 = chunk * mma::kChunk + mma::lane_first_element(lane);
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
#pragma unroll
    for (int j = 0; j < kRowTiles; ++j) {
      const std::int64_t row = row0 + std::int64_t{j} * mma::kTileRows + mma::lane_group(lane);
      out[m][j] = chunk < n_chunks ? load_weight_group(w[m], rows, cols, row, k0, vector_loads)
                                   : make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// A warp's chunks, warp + kSplits·i in ascending i, each handed to consume(weights, chunk) after
// its weights arrived. The first loads are issued before the wait for the kernel before this one
// (the weights are no kernel's output); activations are read only by consume, after the wait.
//
// The ring (kRing): kDepth chunks in a ring; each slot is refilled with the chunk kDepth ahead as
// it is consumed.
template <int kMats, int kRowTiles, int kDepth, class Consume>
__device__ __forceinline__ void stream_ring(const std::uint16_t* const (&w)[kMats],
                                            std::int64_t rows, std::int64_t cols, std::int64_t row0,
                                            int warp, std::int64_t n_chunks, int lane,
                                            bool vector_loads, Consume&& consume) {
  uint4 ring[kDepth][kMats][kRowTiles];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) {
    load_weights<kMats, kRowTiles>(w, rows, cols, row0, warp + std::int64_t{d} * kSplits, n_chunks,
                                   lane, vector_loads, ring[d]);
  }
  wait_for_prerequisites();
  constexpr std::int64_t kStride = std::int64_t{kDepth} * kSplits;
  for (std::int64_t base = warp; base < n_chunks; base += kStride) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const std::int64_t chunk = base + std::int64_t{d} * kSplits;
      if (chunk < n_chunks) {  // warp-uniform
        uint4 current[kMats][kRowTiles];
#pragma unroll
        for (int m = 0; m < kMats; ++m) {
#pragma unroll
          for (int j = 0; j < kRowTiles; ++j) current[m][j] = ring[d][m][j];
        }
        load_weights<kMats, kRowTiles>(w, rows, cols, row0, chunk + kStride, n_chunks, lane,
                                       vector_loads, ring[d]);
        consume(current, chunk);
      }
    }
  }
}

// kDepth chunks (first, first + kSplits, ...) into a buffer; chunks past the end are zeros.
template <int kMats, int kRowTiles, int kDepth>
__device__ __forceinline__ void load_group(const std::uint16_t* const (&w)[kMats],
                                           std::int64_t rows, std::int64_t cols, std::int64_t row0,
                                           std::int64_t first, std::int64_t n_chunks, int lane,
                                           bool vector_loads,
                                           uint4 (&group)[kDepth][kMats][kRowTiles]) {
#pragma unroll
  for (int d = 0; d < kDepth; ++d) {
    load_weights<kMats, kRowTiles>(w, rows, cols, row0, first + std::int64_t{d} * kSplits, n_chunks,
                                   lane, vector_loads, group[d]);
  }
}

template <int kMats, int kRowTiles, int kDepth, class Consume>
__device__ __forceinline__ void consume_group(const uint4 (&group)[kDepth][kMats][kRowTiles],
                                              std::int64_t first, std::int64_t n_chunks,
                                              Consume& consume) {
#pragma unroll
  for (int d = 0; d < kDepth; ++d) {
    const std::int64_t chunk = first + std::int64_t{d} * kSplits;
    if (chunk < n_chunks) consume(group[d], chunk);  // warp-uniform
  }
}

// Ping-pong (kPingPong): buffers a and b of kDepth chunks each; b loads while a is consumed, then a
// loads the group after b while b is consumed. Each load lands in the
// registers its buffer is read from, so the loop carries no copy of a load still in flight (the
// ring's copy of a slot before refilling it may make the warp wait for that load).
template <int kMats, int kRowTiles, int kDepth, class Consume>
__device__ __forceinline__ void stream_ping_pong(const std::uint16_t* const (&w)[kMats],
                                                 std::int64_t rows, std::int64_t cols,
                                                 std::int64_t row0, int warp, std::int64_t n_chunks,
                                                 int lane, bool vector_loads, Consume&& consume) {
  constexpr std::int64_t kGroup = std::int64_t{kDepth} * kSplits;  // chunks a buffer spans
  uint4 a[kDepth][kMats][kRowTiles];
  uint4 b[kDepth][kMats][kRowTiles];
  load_group<kMats, kRowTiles, kDepth>(w, rows, cols, row0, warp, n_chunks, lane, vector_loads, a);
  wait_for_prerequisites();
  for (std::int64_t base = warp; base < n_chunks; base += 2 * kGroup) {
    load_group<kMats, kRowTiles, kDepth>(w, rows, cols, row0, base + kGroup, n_chunks, lane,
                                         vector_loads, b);
    consume_group<kMats, kRowTiles, kDepth>(a, base, n_chunks, consume);
    load_group<kMats, kRowTiles, kDepth>(w, rows, cols, row0, base + 2 * kGroup, n_chunks, lane,
                                         vector_loads, a);
    consume_group<kMats, kRowTiles, kDepth>(b, base + kGroup, n_chunks, consume);
  }
}

// ---- the bulk pipeline (kBulk, sm_90) ----
// The weights go to shared memory by the copy engine (cp.async.bulk: one copy per weight row and
// stage, whole 128-byte lines of a row, no registers held while in flight) in kBulkStages stages
// of kSplits chunks each: stage s holds chunks kSplits·s .. kSplits·s + kSplits - 1 of the
// block's rows, and warp w consumes chunk kSplits·s + w from it - the chunks and the order of the
// ring, so the ring's bits. Each stage has an mbarrier the copies complete (its parity flips per
// fill) and a count of the warps done with it; the warp that brings the count to a multiple of
// kSplits refills the stage with the stage kBulkStages ahead. Rows of padded stride (bank-free
// 16-byte reads of a lane group's rows); rows past the matrix are not copied and their outputs
// not stored; columns past cols read as zeros.
constexpr int kBulkStages = 6;
constexpr int kStageElements = kSplits * mma::kChunk;  // 256 columns of a row per stage
constexpr int kStageRowBytes = kStageElements * 2 + 64;

template <int kMats, int kRowTiles>
struct BulkLayout {
  static constexpr int kRowsPerMat = kRowTiles * mma::kTileRows;
  static constexpr int kRows =
      kMats * kRowsPerMat;  // a stage's rows: matrix m's rows from m·kRowsPerMat
  static constexpr int kSlotBytes = kRows * kStageRowBytes;
  static constexpr int kBarrierOffset = kBulkStages * kSlotBytes;
  static constexpr int kCounterOffset = kBarrierOffset + kBulkStages * 8;
  static constexpr int kBytes = kCounterOffset + kBulkStages * 4;
};

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void barrier_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void barrier_expect_bytes(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ bool barrier_try_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void bulk_copy(unsigned dst, const void* src, unsigned bytes,
                                          unsigned bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
#endif

// The warp's lanes copy stage `stage` of the block's rows into `slot`: lane 0 tells the stage's
// barrier how many bytes come, then lanes 0 .. kRows - 1 each copy one row's stretch.
template <int kMats, int kRowTiles>
__device__ __forceinline__ void fill_stage(const std::uint16_t* const (&w)[kMats],
                                           std::int64_t rows, std::int64_t cols, std::int64_t row0,
                                           std::int64_t stage, unsigned slot, unsigned bar,
                                           int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Layout = BulkLayout<kMats, kRowTiles>;
  const std::int64_t k_begin = stage * kStageElements;
  const std::int64_t k_count =
      cols - k_begin < kStageElements ? cols - k_begin : std::int64_t{kStageElements};
  const auto row_bytes = static_cast<unsigned>(k_count * 2);
  const std::int64_t left = rows - row0;
  const int valid_rows = left < Layout::kRowsPerMat ? static_cast<int>(left) : Layout::kRowsPerMat;
  if (lane == 0) barrier_expect_bytes(bar, row_bytes * static_cast<unsigned>(valid_rows * kMats));
  __syncwarp();
  for (int r = lane; r < Layout::kRows; r += kWarpSize) {
    const int m = r / Layout::kRowsPerMat;
    const int row = r % Layout::kRowsPerMat;
    if (row < valid_rows) {
      const std::uint16_t* const matrix = m == 0 ? w[0] : w[kMats - 1];  // no indexed local array
      bulk_copy(slot + static_cast<unsigned>(r * kStageRowBytes),
                matrix + (row0 + row) * cols + k_begin, row_bytes, bar);
    }
  }
#else
  (void)w, (void)rows, (void)cols, (void)row0, (void)stage, (void)slot, (void)bar, (void)lane;
  __trap();  // never launched: the bulk pipeline is chosen on compute capability 9.0 only
#endif
}

// Waits for a stage's copies; a wait past 2 s (a stage takes microseconds) traps, so a broken
// pipeline fails its launch instead of hanging the device.
__device__ __forceinline__ void wait_stage(unsigned bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (barrier_try_wait(bar, parity)) return;
  const auto global_ns = [] {
    std::uint64_t ns = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
  };
  const std::uint64_t start = global_ns();
  while (!barrier_try_wait(bar, parity)) {
    if (global_ns() - start > 2'000'000'000ull) __trap();
  }
#else
  (void)bar, (void)parity;
  __trap();
#endif
}

template <int kMats, int kRowTiles, class Consume>
__device__ __forceinline__ void stream_bulk(const std::uint16_t* const (&w)[kMats],
                                            std::int64_t rows, std::int64_t cols, std::int64_t row0,
                                            int warp, std::int64_t n_chunks, int lane,
                                            Consume&& consume) {
  using Layout = BulkLayout<kMats, kRowTiles>;
  extern __shared__ __align__(128) unsigned char bulk_smem[];
  const unsigned base = shared_address(bulk_smem);
  unsigned* const released = reinterpret_cast<unsigned*>(bulk_smem + Layout::kCounterOffset);
  const auto slot_of = [&](int slot) {
    return base + static_cast<unsigned>(slot * Layout::kSlotBytes);
  };
  const auto barrier_of = [&](int slot) {
    return base + static_cast<unsigned>(Layout::kBarrierOffset + slot * 8);
  };
  const std::int64_t n_stages = (n_chunks + kSplits - 1) / kSplits;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    for (int slot = 0; slot < kBulkStages; ++slot) {
      barrier_init(barrier_of(slot), 1);
      released[slot] = 0;
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
#endif
  __syncthreads();
  if (warp == 0) {  // the weights are no kernel's output: the first stages before the wait
    for (std::int64_t stage = 0; stage < kBulkStages && stage < n_stages; ++stage) {
      const int slot = static_cast<int>(stage);
      fill_stage<kMats, kRowTiles>(w, rows, cols, row0, stage, slot_of(slot), barrier_of(slot),
                                   lane);
    }
  }
  wait_for_prerequisites();
  const int group = mma::lane_group(lane);
  for (std::int64_t stage = 0; stage < n_stages; ++stage) {
    const int slot = static_cast<int>(stage % kBulkStages);
    wait_stage(barrier_of(slot), static_cast<unsigned>((stage / kBulkStages) & 1));
    const std::int64_t chunk = stage * kSplits + warp;
    if (chunk < n_chunks) {  // warp-uniform
      const std::int64_t k0 = chunk * mma::kChunk + mma::lane_first_element(lane);
      const unsigned char* const stretch = bulk_smem + slot * Layout::kSlotBytes +
                                           (warp * mma::kChunk + mma::lane_first_element(lane)) * 2;
      uint4 weights[kMats][kRowTiles];
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
#pragma unroll
        for (int j = 0; j < kRowTiles; ++j) {
          const int r = m * Layout::kRowsPerMat + j * mma::kTileRows + group;
          weights[m][j] = k0 < cols ? *reinterpret_cast<const uint4*>(stretch + r * kStageRowBytes)
                                    : make_uint4(0u, 0u, 0u, 0u);
        }
      }
      consume(weights, chunk);
    }
    // Done with the stage: the warp that completes its count refills it.
    __syncwarp();
    unsigned last = 0;
    if (lane == 0) {
      __threadfence_block();
      last = atomicAdd(&released[slot], 1u) % kSplits == kSplits - 1 ? 1u : 0u;
    }
    last = __shfl_sync(kFullMask, last, 0);
    if (last != 0 && stage + kBulkStages < n_stages) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
      fill_stage<kMats, kRowTiles>(w, rows, cols, row0, stage + kBulkStages, slot_of(slot),
                                   barrier_of(slot), lane);
    }
  }
}

// What a launch computes around the product: the SwiGLU of a gate|up pair, the RMSNorm of x
// folded in, the residual add in the epilogue.
template <bool kSwiglu, bool kNorm, bool kAccumulate>
struct Form {
  static constexpr bool swiglu = kSwiglu;
  static constexpr bool norm = kNorm;
  static constexpr bool accumulate = kAccumulate;
};
using PlainForm = Form<false, false, false>;
using SwigluForm = Form<true, false, false>;
using NormForm = Form<false, true, false>;
using NormSwigluForm = Form<true, true, false>;
using AccumulateForm = Form<false, false, true>;

// Each token's 1 / rms from the warps' sums of squares, added in split order (Form::norm):
// 1 / sqrt(Σx² / cols + eps), in double as the RMSNorm kernel's.
__device__ __forceinline__ float split_inverse_rms(const float* split_squares, int stride,
                                                   std::int64_t cols, float eps) {
  float total = split_squares[0];
#pragma unroll
  for (int s = 1; s < kSplits; ++s) total += split_squares[s * stride];
  return inverse_rms(total, cols, eps);
}

// A block's shapes for a form and tile counts, and its shared memory.
template <class Form, int kTokenTiles, int kRowTiles>
struct BlockTile {
  static constexpr int kMats = Form::swiglu ? 2 : 1;
  static constexpr int kBlockRows = mma::kTileRows * kRowTiles;
  static constexpr int kBlockTokens = mma::kTileTokens * kTokenTiles;
  using Accumulators = float[kTokenTiles][kMats][kRowTiles][4];
  using SplitSums = float[kSplits][kMats][kBlockTokens][kBlockRows];
  using SplitSquares = float[kSplits][Form::norm ? kBlockTokens : 1];
};

// The warp's split sums, and (Form::norm) its sums of squares of tokens group and group + 8 of
// each tile (the four lanes of a group summed their own elements; added by a fixed butterfly),
// into shared memory.
template <class Form, int kTokenTiles, int kRowTiles>
__device__ __forceinline__ void write_split_sums(
    const typename BlockTile<Form, kTokenTiles, kRowTiles>::Accumulators& acc,
    const float (&sum_squares)[kTokenTiles][2], int warp, int lane,
    typename BlockTile<Form, kTokenTiles, kRowTiles>::SplitSums& split_sums,
    typename BlockTile<Form, kTokenTiles, kRowTiles>::SplitSquares& split_squares) {
  constexpr int kMats = BlockTile<Form, kTokenTiles, kRowTiles>::kMats;
#pragma unroll
  for (int tt = 0; tt < kTokenTiles; ++tt) {
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const mma::Cell cell = mma::c_cell(lane, i);
          split_sums[warp][m][tt * mma::kTileTokens + cell.token][j * mma::kTileRows + cell.row] =
              acc[tt][m][j][i];
        }
      }
    }
  }
  if constexpr (Form::norm) {
#pragma unroll
    for (int tt = 0; tt < kTokenTiles; ++tt) {
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float v = sum_squares[tt][u];
        v += __shfl_xor_sync(kFullMask, v, 1);
        v += __shfl_xor_sync(kFullMask, v, 2);
        if (lane % 4 == 0) {
          split_squares[warp][tt * mma::kTileTokens + mma::lane_group(lane) + 8 * u] = v;
        }
      }
    }
  }
}

// After the barrier: each of the block's outputs as its split sums added in split order, scaled
// by the token's 1 / rms (Form::norm), stored (SwiGLU: swiglu_value(gate, up), the SwiGLU
// kernel's expression; accumulate: added to y).
template <class Form, int kTokenTiles, int kRowTiles>
__device__ __forceinline__ void merge_and_store(
    const typename BlockTile<Form, kTokenTiles, kRowTiles>::SplitSums& split_sums,
    const typename BlockTile<Form, kTokenTiles, kRowTiles>::SplitSquares& split_squares,
    std::int64_t n_tokens, std::int64_t rows, std::int64_t row0, std::int64_t cols, float eps,
    float* y) {
  using Tile = BlockTile<Form, kTokenTiles, kRowTiles>;
  for (int index = static_cast<int>(threadIdx.x); index < Tile::kBlockTokens * Tile::kBlockRows;
       index += kThreads) {
    const int token = index / Tile::kBlockRows;
    const int r = index % Tile::kBlockRows;
    if (token >= n_tokens || row0 + r >= rows) continue;
    float sums[Tile::kMats];
#pragma unroll
    for (int m = 0; m < Tile::kMats; ++m) {
      float sum = split_sums[0][m][token][r];
#pragma unroll
      for (int s = 1; s < kSplits; ++s) sum += split_sums[s][m][token][r];
      sums[m] = sum;
    }
    if constexpr (Form::norm) {
      const float scale =
          split_inverse_rms(&split_squares[0][token], Tile::kBlockTokens, cols, eps);
#pragma unroll
      for (int m = 0; m < Tile::kMats; ++m) sums[m] = __fmul_rn(scale, sums[m]);
    }
    float* out = y + token * rows + row0 + r;
    if constexpr (Form::swiglu) {
      *out = swiglu_value(sums[0], sums[Tile::kMats - 1]);
    } else if constexpr (Form::accumulate) {
      *out = __fadd_rn(*out, sums[0]);
    } else {
      *out = sums[0];
    }
  }
}

template <class Form, int kTokenTiles, bool kUpper, int kRowTiles, TensorPipeline kPipeline>
__global__ void __launch_bounds__(kThreads)
    tensor_core_gemv_kernel(const float* __restrict__ x, std::int64_t n_tokens,
                            const MatmulSegments segments, std::int64_t cols, bool vector_loads,
                            const float* __restrict__ norm_weight, float eps) {
  using Tile = BlockTile<Form, kTokenTiles, kRowTiles>;
  constexpr int kMats = Tile::kMats;
  constexpr int kBlockRows = Tile::kBlockRows;
  static_assert(kLoadsInFlight >= kMats * kRowTiles, "at least one chunk in flight");
  static_assert(!(Form::accumulate && (Form::swiglu || Form::norm)),
                "the residual add goes with a plain product");
  __shared__ typename Tile::SplitSums split_sums;
  __shared__ typename Tile::SplitSquares split_squares;

  allow_dependents();
  const std::int64_t block = blockIdx.x;
  if (block >= segments.total_units) return;  // block-uniform; before any barrier
  const MatmulSegment segment = segment_of<Form::swiglu>(segments, block);
  const std::int64_t rows = segment.rows;
  float* const y = segment.y;
  const std::uint16_t* w[kMats];
  w[0] = static_cast<const std::uint16_t*>(segment.w);
  if constexpr (Form::swiglu) w[kMats - 1] = static_cast<const std::uint16_t*>(segments.s[1].w);
  const std::int64_t row0 = (block - segment.first_unit) * kBlockRows;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t n_chunks = (cols + mma::kChunk - 1) / mma::kChunk;

  typename Tile::Accumulators acc;
  float sum_squares[kTokenTiles][2];
#pragma unroll
  for (int tt = 0; tt < kTokenTiles; ++tt) {
    sum_squares[tt][0] = 0.0f;
    sum_squares[tt][1] = 0.0f;
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[tt][m][j][i] = 0.0f;
      }
    }
  }
  const int group = mma::lane_group(lane);
  auto consume = [&](const uint4(&weights)[kMats][kRowTiles], std::int64_t chunk) {
    accumulate_chunk<Form, kTokenTiles, kUpper, kMats, kRowTiles>(
        x, norm_weight, n_tokens, cols, chunk * mma::kChunk + mma::lane_first_element(lane), group,
        vector_loads, weights, acc, sum_squares);
  };
  if constexpr (kPipeline == TensorPipeline::kBulk) {
    stream_bulk<kMats, kRowTiles>(w, rows, cols, row0, warp, n_chunks, lane, consume);
  } else if constexpr (kPipeline == TensorPipeline::kPingPong) {
    stream_ping_pong<kMats, kRowTiles, kLoadsInFlight / (kMats * kRowTiles)>(
        w, rows, cols, row0, warp, n_chunks, lane, vector_loads, consume);
  } else {
    stream_ring<kMats, kRowTiles, kLoadsInFlight / (kMats * kRowTiles)>(
        w, rows, cols, row0, warp, n_chunks, lane, vector_loads, consume);
  }

  // Split sums to shared memory, then added in split order.
  write_split_sums<Form, kTokenTiles, kRowTiles>(acc, sum_squares, warp, lane, split_sums,
                                                 split_squares);
  __syncthreads();
  merge_and_store<Form, kTokenTiles, kRowTiles>(split_sums, split_squares, n_tokens, rows, row0,
                                                cols, eps, y);
}

template <class Form, int kTokenTiles, bool kUpper, int kRowTiles, TensorPipeline kPipeline>
void launch(const float* x, std::int64_t n_tokens, std::span<const MatmulOutput> outputs,
            bool vector_loads, const TensorGemvFusion& fusion, cudaStream_t stream) {
  constexpr std::int64_t kBlockRows = std::int64_t{mma::kTileRows} * kRowTiles;
  const MatmulSegments segments = Form::swiglu ? make_swiglu_segments(outputs, kBlockRows, 0)
                                               : make_segments(outputs, kBlockRows, 0);
  if (segments.total_units == 0) return;
  require(segments.total_units <= std::int64_t{0x7fffffff},
          "matmul_small_batch: too many rows for one launch");
  const auto kernel = tensor_core_gemv_kernel<Form, kTokenTiles, kUpper, kRowTiles, kPipeline>;
  std::size_t dynamic_smem = 0;
  if constexpr (kPipeline == TensorPipeline::kBulk) {
    dynamic_smem = BulkLayout < Form::swiglu ? 2 : 1, kRowTiles > ::kBytes;
    detail::allow_dynamic_smem(kernel, dynamic_smem);
  }
  launch_dependent_smem(kernel, dim3(static_cast<unsigned>(segments.total_units)), dim3(kThreads),
                        dynamic_smem, stream, x, n_tokens, segments, outputs.front().w.cols,
                        vector_loads, fusion.norm_weight, fusion.eps);
}

// Tiles by token count: up to 8 tokens one tile whose upper 8 tokens are known to be empty (no
// loads, no split), up to 16 one full tile, then 2 or 4 tiles. 16 rows a block (each activation
// split serves two row tiles); the SwiGLU form holds 8 rows of each of its two matrices.
template <class Form, TensorPipeline kPipeline>
void dispatch_tiles(const float* x, std::int64_t n_tokens, std::span<const MatmulOutput> outputs,
                    bool vector_loads, const TensorGemvFusion& fusion, cudaStream_t stream) {
  constexpr int kRowTiles = Form::swiglu ? 1 : 2;
  if (n_tokens <= 8) {
    return launch<Form, 1, false, kRowTiles, kPipeline>(x, n_tokens, outputs, vector_loads, fusion,
                                                        stream);
  }
  if (n_tokens <= 16) {
    return launch<Form, 1, true, kRowTiles, kPipeline>(x, n_tokens, outputs, vector_loads, fusion,
                                                       stream);
  }
  if (n_tokens <= 32) {
    return launch<Form, 2, true, kRowTiles, kPipeline>(x, n_tokens, outputs, vector_loads, fusion,
                                                       stream);
  }
  launch<Form, 4, true, kRowTiles, kPipeline>(x, n_tokens, outputs, vector_loads, fusion, stream);
}

// The plain and SwiGLU products run every pipeline (the benches compare them); the fused forms
// the default one.
template <class Form>
void dispatch(const float* x, std::int64_t n_tokens, std::span<const MatmulOutput> outputs,
              bool vector_loads, const TensorGemvFusion& fusion, cudaStream_t stream,
              TensorPipeline pipeline) {
  constexpr bool kEveryPipeline = !Form::norm && !Form::accumulate;
  if constexpr (kEveryPipeline) {
    switch (pipeline) {
      case TensorPipeline::kRing:
        return dispatch_tiles<Form, TensorPipeline::kRing>(x, n_tokens, outputs, vector_loads,
                                                           fusion, stream);
      case TensorPipeline::kPingPong:
        return dispatch_tiles<Form, TensorPipeline::kPingPong>(x, n_tokens, outputs, vector_loads,
                                                               fusion, stream);
      case TensorPipeline::kBulk:
        // Whole 16-byte row stretches (cols % 8 == 0, aligned) on sm_90; else the ring's loads.
        if (vector_loads && bulk_copy_supported()) {
          return dispatch_tiles<Form, TensorPipeline::kBulk>(x, n_tokens, outputs, vector_loads,
                                                             fusion, stream);
        }
        return dispatch_tiles<Form, TensorPipeline::kRing>(x, n_tokens, outputs, vector_loads,
                                                           fusion, stream);
    }
    require(false, "matmul_small_batch (tensor cores): unknown pipeline");
  } else {
    require(pipeline == kDefaultTensorPipeline,
            "matmul_small_batch (tensor cores): the fused forms run the default pipeline only");
    dispatch_tiles<Form, kDefaultTensorPipeline>(x, n_tokens, outputs, vector_loads, fusion,
                                                 stream);
  }
}

}  // namespace

void matmul_tensor_cores(const float* x, std::int64_t n_tokens,
                         std::span<const MatmulOutput> outputs, bool swiglu, bool vector_loads,
                         const TensorGemvFusion& fusion, cudaStream_t stream,
                         TensorPipeline pipeline) {
  require(n_tokens >= 1 && n_tokens <= kSmallBatch,
          "matmul_small_batch (tensor cores): token count " + str(n_tokens) + " outside [1, " +
              str(kSmallBatch) + "]");
  require(outputs.front().w.dtype == DType::kBF16,
          "matmul_small_batch (tensor cores): bf16 weights only, got " +
              std::string(dtype_name(outputs.front().w.dtype)));
  const bool norm = fusion.norm_weight != nullptr;
  require(!(fusion.accumulate && (norm || swiglu || outputs.size() != 1)),
          "matmul_accumulate: one matrix, without a norm or a SwiGLU");
  if (fusion.accumulate)
    return dispatch<AccumulateForm>(x, n_tokens, outputs, vector_loads, fusion, stream, pipeline);
  if (norm && swiglu)
    return dispatch<NormSwigluForm>(x, n_tokens, outputs, vector_loads, fusion, stream, pipeline);
  if (norm) return dispatch<NormForm>(x, n_tokens, outputs, vector_loads, fusion, stream, pipeline);
  if (swiglu)
    return dispatch<SwigluForm>(x, n_tokens, outputs, vector_loads, fusion, stream, pipeline);
  dispatch<PlainForm>(x, n_tokens, outputs, vector_loads, fusion, stream, pipeline);
}

}  // namespace selfspec::kernels::cuda::detail
