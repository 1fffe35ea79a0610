// The CUDA kernels of the engine (host launch API; the kernels live in the .cu files beside this
// header). Storage: weights bf16/f16/f32 row-major in device memory, activations f32, accumulation
// f32. Every function enqueues work on `stream` and checks the launch (SELFSPEC_CUDA_CHECK_LAUNCH).
//
// Token-count invariance on the GPU (what makes greedy self-speculative decoding bit-identical
// to plain decoding): decode (T = 1) and verification (T = K + 1 <= kSmallBatch = 64: chains,
// trees, SWIFT's widths) use matmul_small_batch, whose per-output reduction order does not depend
// on T, and attention, whose per-query computation depends only on the keys and values it may
// see, in order (the same for a tree node as for that token decoded alone after its path was
// kept). Prefill chunks with T > kSmallBatch go through cuBLASLt (cublaslt_gemm.hpp); they are
// shared by the autoregressive and the speculative run, so they cannot make the two differ.
//
// CUDA graphs: values that change from step to step but not the launch shape (the KV length
// n_past) are read from device memory (StepParams), so a captured graph replays with new values
// after the host updates that memory; grids are sized by static bounds (the cache capacity).
#pragma once

#include "core/dtype.hpp"
#include "core/weight_format.hpp"
#include "kernels/cuda/position_step.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace selfspec::kernels::cuda {

// A row-major weight matrix [rows × cols] in device memory. Non-owning.
struct DeviceWeight {
  DType dtype = DType::kBF16;
  const void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// Per-forward values read by kernels from device memory (see above).
struct StepParams {
  std::int32_t n_past = 0;  // cache slots filled before this forward's tokens
  std::int32_t padding = 0;
};

// The largest token count of matmul_small_batch (decode and verification forwards: a draft of at
// most 63 tokens plus the target's own, decode/control_message.hpp's kMaxTokens).
inline constexpr std::int64_t kSmallBatch = 64;

// --- elementwise and row-wise ------------------------------------------------------------------
// out[t] = row tokens[t] of the table when vocab_begin <= tokens[t] < vocab_begin + table.rows,
// zeros otherwise (vocab-parallel embedding).
void embedding(const DeviceWeight& table, std::int64_t vocab_begin, const std::int32_t* tokens,
               std::int64_t n_tokens, float* out, cudaStream_t stream);
// y[t] = weight ⊙ x[t] / sqrt(mean(x[t]²) + eps) (HF LlamaRMSNorm); y may alias x.
void rmsnorm(const float* x, const float* weight, float eps, std::int64_t n_tokens,
             std::int64_t dim, float* y, cudaStream_t stream);
// Fused residual add: x += delta, then y = rmsnorm(x). One pass over x.
void add_rmsnorm(float* x, const float* delta, const float* weight, float eps,
                 std::int64_t n_tokens, std::int64_t dim, float* y, cudaStream_t stream);
void add_inplace(float* x, const float* y, std::int64_t n, cudaStream_t stream);
void add_bias(float* x, const float* bias, std::int64_t n_tokens, std::int64_t dim,
              cudaStream_t stream);
// out = silu(gate) * up (kernels/shared_math.hpp); out may alias gate.
void swiglu(const float* gate, const float* up, float* out, std::int64_t n, cudaStream_t stream);
// Rotate-half RoPE in place on n_heads head vectors per token row (row t at x + t*row_stride),
// cos and sin read from a RoPE table of table_positions rows (kernels/cpu/rope.hpp: row p holds
// head_dim / 2 cosines then head_dim / 2 sines; made on the host, so the rotation has the CPU's
// bits). A position outside the table leaves its row as it is (callers keep positions inside:
// LlamaModel grows the table before each forward).
void rope(float* x, std::int64_t n_tokens, std::int64_t row_stride, std::int64_t n_heads,
          std::int64_t head_dim, const std::int32_t* positions, const float* table,
          std::int64_t table_positions, cudaStream_t stream);
// Writes k, v ([T][kv_heads*head_dim]) into the cache ([kv_heads][capacity][head_dim] elements
// of kv_dtype: f32, or bf16 rounded to nearest even as core/dtype.hpp's f32_to_bf16) at slots
// step->n_past + t (slots outside the cache are not written: callers check n_past + T <=
// capacity on the host, as the CUDA backend does for every forward).
void write_kv(const float* k, const float* v, std::int64_t n_tokens, std::int64_t kv_heads,
              std::int64_t head_dim, std::int64_t capacity, const StepParams* step, void* k_cache,
              void* v_cache, DType kv_dtype, cudaStream_t stream);
// rope(q) (when q is not null), rope(k), then write_kv(k, v) in one launch, with the same bits as
// those three calls: RoPE on n_q_heads heads per row of q (row stride q_stride) and kv_heads heads
// per row of k (row stride k_stride, rotated in place too), the rotated K rows and the V rows (v:
// [T][kv_heads*head_dim]) into the cache at slots step->n_past + t.
struct RopeKvArgs {
  float* q = nullptr;
  std::int64_t q_stride = 0;
  std::int64_t n_q_heads = 0;
  float* k = nullptr;
  std::int64_t k_stride = 0;
  const float* v = nullptr;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t capacity = 0;
  DType kv_dtype = DType::kF32;  // the cache's elements (as write_kv)
};
// (RoPE from the table, as rope(); a token whose position is outside it is neither rotated nor
// written.)
void rope_write_kv(const RopeKvArgs& args, std::int64_t n_tokens, const std::int32_t* positions,
                   const float* table, std::int64_t table_positions, const StepParams* step,
                   void* k_cache, void* v_cache, cudaStream_t stream);
// dst[i] = src[rows[i]] for rows of `dim` floats (the logit rows before the LM head).
void gather_rows(const float* src, const std::int32_t* rows, std::int64_t n_rows, std::int64_t dim,
                 float* dst, cudaStream_t stream);
// out[r][i] = fill for i < width, then out[r][ids[j]] = values[r][j] for j < n_ids (rows of
// `width`; ids distinct in [0, width)): a pruned draft vocabulary's logits as vocab-shard rows.
// Same result as kernels/cpu/scatter.hpp.
void scatter_columns(const float* values, std::int64_t rows, const std::int32_t* ids,
                     std::int64_t n_ids, std::int64_t width, float fill, float* out,
                     cudaStream_t stream);
// In every block b < blocks (block b at base + b * block_stride bytes, rows_per_block rows of
// row_bytes bytes): row to + i = row from[i] for i = 0, 1, ... in that order — the KV cache
// keeping a verified tree's accepted path (kernels/row_compaction_contract.hpp: from ascending
// strictly, from[i] >= to + i, at most kMaxCompactedRows rows; throws otherwise). `from` is host
// memory, passed by value in the launch: one kernel, no upload. Same bits as
// kernels/cpu/row_compaction.hpp.
void compact_rows(void* base, std::int64_t blocks, std::int64_t block_stride,
                  std::int64_t rows_per_block, std::int64_t row_bytes,
                  std::span<const std::int32_t> from, std::int64_t to, cudaStream_t stream);
// f32 activations -> bf16 or f16 (round to nearest even), for the cuBLASLt path.
void convert_activations(const float* in, DType out_dtype, void* out, std::int64_t n,
                         cudaStream_t stream);

// --- attention ---------------------------------------------------------------------------------
// Same semantics as kernels/cpu/attention.hpp with n_past = step->n_past: query t (slot
// n_past + t) sees slots [0, n_past) and new slots by the causal or tree mask (tree_mask: device
// T × T of 0/1, nullptr = causal; tree masks take at most kSmallBatch tokens). Split-KV
// (flash-decoding style) over the query's visible slots in ascending order: they are cut into
// splits of attention_split_slots(n_visible) slots, processed in parallel and merged in split
// order, so the result depends only on the keys and values the query sees and their order — not
// on T, the cache capacity, or where a tree put the query's ancestors. The grid is sized by
// `capacity`.
struct AttentionDims {
  std::int64_t n_tokens = 0;
  std::int64_t n_q_heads = 0;
  std::int64_t n_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t capacity = 0;
  DType kv_dtype = DType::kF32;  // f32 or bf16 (widened exactly where read)
};
// The workspace of attention() for these dims (split partials and merge counters). Inputs with
// more tokens than fit a 64 MiB budget (long prefill chunks) are processed in several passes over
// that workspace; at least kSmallBatch tokens always fit in one pass. The result does not depend
// on the passes. The workspace must be zero-filled before its first use; attention() leaves it
// ready for the next call (its counters back at zero).
std::size_t attention_workspace_bytes(const AttentionDims& dims);
void attention(const float* q, const void* k_cache, const void* v_cache, const AttentionDims& dims,
               const StepParams* step, const std::uint8_t* tree_mask, float scale, float* out,
               void* workspace, cudaStream_t stream);

// --- matmul ------------------------------------------------------------------------------------
// y[t][n] = Σ_k x[t][k] · w[n][k] for T = n_tokens <= kSmallBatch, on one of two kernels, each
// token-count invariant (the order of the sum producing y[t][n] depends on the dtype and cols
// only, never on T or on the launch):
// * CUDA cores (matmul_small_batch.cu; every dtype): a warp per pair (T <= 2) or quad of output
//   rows, lane-strided 16-byte weight loads, f32 FMA per lane in ascending k, a fixed butterfly
//   reduction; tiles of 16 tokens. Its bits have a scalar reference.
// * Tensor cores (matmul_tensor_core.cu; bf16 weights): activations split into three bf16 parts
//   (exactly), mma.sync over chunks of 32 k in a fixed split-K order; all 64 tokens in one weight
//   stream. Within 1e-5 of Σ|x·w| of the exact product; no bit-exact scalar reference (a tensor
//   core's internal summation is not specified to the bit).
// kAuto picks the CUDA cores (the faster decode: 4096 x 4096 at T = 1 in 12.7 against 17.9 us on an
// H200) unless SELFSPEC_CUDA_GEMV=tensor-cores asks for the tensor cores for bf16 weights on
// compute capability 8.0 and above (auto and cuda-cores are the other accepted values): the same
// kernel for every T of a process, as token-count invariance needs. kTensorCores with weights
// other than bf16 throws; tests and benchmarks name a kernel to compare.
enum class GemvKernel { kAuto, kCudaCores, kTensorCores };
// The kernel kAuto resolves to for weights of `dtype` on the current device.
GemvKernel auto_gemv_kernel(DType dtype);
// Whether the current device runs the tensor-core GEMV and its fused forms (compute capability 8.0
// or above), whichever kernel kAuto picks.
bool tensor_core_gemv_supported();
void matmul_small_batch(const float* x, std::int64_t n_tokens, const DeviceWeight& w, float* y,
                        cudaStream_t stream, GemvKernel kernel = GemvKernel::kAuto);
// The same product of one x with up to kMaxMatmulOutputs matrices of one dtype and one column
// count (fused Wq|Wk|Wv or gate|up), in one launch: each y equals matmul_small_batch(x, T, w, y)
// with the same kernel bit for bit.
inline constexpr int kMaxMatmulOutputs = 4;
struct MatmulOutput {
  DeviceWeight w;
  float* y = nullptr;
};
void matmul_small_batch(const float* x, std::int64_t n_tokens,
                        std::span<const MatmulOutput> outputs, cudaStream_t stream,
                        GemvKernel kernel = GemvKernel::kAuto);
// out = swiglu(x · gateᵀ, x · upᵀ) (gate and up of one shape and dtype), for T <= kSmallBatch, in
// one launch: a warp or block holds gate row i and up row i and stores their SwiGLU, with the same
// bits as matmul_small_batch of each (same kernel) followed by swiglu().
void matmul_swiglu(const float* x, std::int64_t n_tokens, const DeviceWeight& gate,
                   const DeviceWeight& up, float* out, cudaStream_t stream,
                   GemvKernel kernel = GemvKernel::kAuto);
// The fused forms of both GEMVs, for bf16 weights, T <= kSmallBatch, each token-count invariant
// (kernel: as matmul_small_batch's; they throw for other dtypes):
// * matmul_normed: ys = rmsnorm(x) · Wᵀ with the norm folded into the product,
//   y[t][n] = r_t · Σ_k w[n][k] · (g[k] · x[t][k]), r_t = 1 / sqrt(Σ_k x[t][k]² / cols + eps)
//   (the squares summed in the kernel's own fixed order, in f32; the normalised x is never
//   stored). Within rounding of rmsnorm then matmul_small_batch, not their bits. Several matrices
//   of one cols in one launch, each output its own launch's bits.
// * matmul_normed_swiglu: out = swiglu of the two normed products (gate|up in one launch).
// * matmul_accumulate: y += x · Wᵀ, the residual add in the epilogue (each y element read and
//   written by one thread after the product: matmul_small_batch then add_inplace, bit for bit).
// fused_gemv_available(dtype): whether models should take them - bf16, unless
// SELFSPEC_CUDA_FUSE=0 (read once per process: 0 or 1, unset meaning 1).
bool fused_gemv_available(DType dtype);
void matmul_normed(const float* x, const float* norm_weight, float eps, std::int64_t n_tokens,
                   std::span<const MatmulOutput> outputs, cudaStream_t stream,
                   GemvKernel kernel = GemvKernel::kAuto);
void matmul_normed_swiglu(const float* x, const float* norm_weight, float eps,
                          std::int64_t n_tokens, const DeviceWeight& gate, const DeviceWeight& up,
                          float* out, cudaStream_t stream, GemvKernel kernel = GemvKernel::kAuto);
void matmul_accumulate(const float* x, std::int64_t n_tokens, const DeviceWeight& w, float* y,
                       cudaStream_t stream, GemvKernel kernel = GemvKernel::kAuto);
// The RoPE form (position_step.hpp): Q|K|V and the attention sublayer's position step in one
// launch of the CUDA-core GEMV (bf16 weights, T <= kSmallBatch): for each matrix its HeadOutput,
// Wq's rows rotated into step.q, Wk's rotated and Wv's as computed into the cache at slots
// step_params->n_past + t. The bits of matmul_small_batch (matmul_normed when norm_weight is not
// null) on the CUDA cores followed by rope_write_kv; K and V are never stored in f32. Every
// matrix's rows a multiple of head_dim, head_dim a multiple of 4; Wq's rows step.q_rows.
struct HeadMatmul {
  DeviceWeight w;
  HeadOutput output = HeadOutput::kRotated;
};
void matmul_rope_kv(const float* x, const float* norm_weight, float eps, std::int64_t n_tokens,
                    std::span<const HeadMatmul> outputs, const PositionStep& step,
                    const StepParams* step_params, cudaStream_t stream);

// --- quantized weights (GGUF formats run as stored; kernels/cuda/quant_rows.hpp) ---------------
// A matrix in the CUDA backend's quantized rows: the layout quant_rows.hpp describes, built on the
// host (backend/quant_rows_builder.hpp), 256-byte aligned. Non-owning.
struct QuantWeight {
  WeightFormat format = WeightFormat::kQ4_0;
  const void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};
// rmsnorm(x) quantized into `workspace` as quantize_activations would quantize it (dim a multiple
// of 32): one launch, the bits of rmsnorm then quantize_activations; the normalised x is never
// stored.
void rmsnorm_quantize(const float* x, const float* weight, float eps, std::int64_t n_tokens,
                      std::int64_t dim, void* workspace, cudaStream_t stream);
// Bytes of the quantized activations of [tokens × cols] (cols a multiple of 32).
std::size_t quant_activations_bytes(std::int64_t tokens, std::int64_t cols);
// x [tokens × cols] quantized into `workspace` (quant_activations_bytes, 256-byte aligned): the
// CPU quantizer's bits (kernels/cpu/quant_matmul.hpp).
void quantize_activations(const float* x, std::int64_t tokens, std::int64_t cols, void* workspace,
                          cudaStream_t stream);
// y[t][n] = row n of w times token t, for the `tokens` tokens quantized in `activations` (by
// quantize_activations with the same tokens and w.cols): the canonical sequence of
// quant_rows.hpp, the CPU's bits, the same whatever `tokens` (token-count invariance).
void quant_matmul(const void* activations, std::int64_t tokens, const QuantWeight& w, float* y,
                  cudaStream_t stream);
// The same for up to kMaxMatmulOutputs matrices of one format and cols (Wq|Wk|Wv) in one launch:
// each y the bits of its own quant_matmul.
struct QuantMatmulOutput {
  QuantWeight w;
  float* y = nullptr;
};
void quant_matmul(const void* activations, std::int64_t tokens,
                  std::span<const QuantMatmulOutput> outputs, cudaStream_t stream);
// out = swiglu_value(gate product, up product) (gate and up of one format and shape) in one
// launch: the bits of quant_matmul of each followed by swiglu().
void quant_matmul_swiglu(const void* activations, std::int64_t tokens, const QuantWeight& gate,
                         const QuantWeight& up, float* out, cudaStream_t stream);
// The RoPE form (position_step.hpp) of the quantized GEMV: up to kMaxMatmulOutputs matrices of
// one format and cols (a Q4_K_M file's Wq|Wk in one launch, its Q6_K Wv in another), each with
// its HeadOutput; the bits of quant_matmul followed by rope_write_kv. Rows a multiple of head_dim,
// head_dim a multiple of 8 (a tile's four pairs in one head).
struct QuantHeadMatmul {
  QuantWeight w;
  HeadOutput output = HeadOutput::kRotated;
};
void quant_matmul_rope_kv(const void* activations, std::int64_t tokens,
                          std::span<const QuantHeadMatmul> outputs, const PositionStep& step,
                          const StepParams* step_params, cudaStream_t stream);
// y += the product (the residual add in the epilogue: each y element read and written by one
// thread after its product, the bits of quant_matmul then add_inplace).
void quant_matmul_accumulate(const void* activations, std::int64_t tokens, const QuantWeight& w,
                             float* y, cudaStream_t stream);
// Whether models should take the quantized fused forms (rmsnorm_quantize before Q|K|V and
// gate|up, quant_matmul_accumulate for o and down): unless SELFSPEC_CUDA_FUSE=0.
bool quant_fusion_available();
// out = w dequantized (ggml's values) and rounded to bf16 (kernels/shared_math.hpp's
// float_to_bf16_bits): [rows × cols] bf16, row-major, the weights of a quantized prefill chunk's
// cuBLASLt GEMM. Prefill only: its products are close to, not the bits of, quant_matmul's.
void quant_dequantize_bf16(const QuantWeight& w, void* out, cudaStream_t stream);
// out[t] = row tokens[t] − vocab_begin of the table dequantized (ggml's values), zeros outside.
void quant_embedding(const QuantWeight& table, std::int64_t vocab_begin, const std::int32_t* tokens,
                     std::int64_t n_tokens, float* out, cudaStream_t stream);

// --- logits (vocab-shard rows) -----------------------------------------------------------------
// Per row of a vocab shard: the max of l/T, the first argmax (global id = vocab_begin + index) and
// Σ exp(l/T − max) — the local-reduction statistics. Layout matches decode/ShardStats.
struct RowStatsRecord {
  double max = 0.0;
  double sum_exp = 0.0;
  std::int32_t argmax = -1;
  std::int32_t padding = 0;
};
void row_stats(const float* logits, std::int64_t rows, std::int64_t vocab_local,
               std::int64_t vocab_begin, double inv_temperature, RowStatsRecord* out,
               cudaStream_t stream);
// In place, per row: logits / temperature, then -inf for every entry below the row's k-th
// largest value (top_k > 0; ties with the k-th kept), then -inf outside the top-p nucleus
// (HF semantics: drop the smallest entries whose cumulative probability stays <= 1 - top_p,
// keeping at least one). The result softmaxes to the warped distribution of verify/sampler.hpp.
void warp_logits(float* logits, std::int64_t rows, std::int64_t vocab, double temperature,
                 std::int32_t top_k, double top_p, cudaStream_t stream);
// probs[r] = softmax(logits[r]) in f32 (rows of `vocab`), numerically stable.
void softmax_rows(const float* logits, std::int64_t rows, std::int64_t vocab, float* probs,
                  cudaStream_t stream);
// Speculative-sampling acceptance for one verification on a full-vocabulary device (TP = 1):
// p: target probabilities [(k+1) × vocab], q: draft probabilities [k × vocab], drafted: k ids,
// uniforms: k + 1 draws in [0, 1). Accepts drafted[j] while u_j · q_j(d_j) < p_j(d_j); at the
// first rejection draws from norm(max(0, p_j − q_j)) by inverse CDF at uniforms[k] (ascending
// ids), or, when all k are accepted, from p_k. Writes the accepted count and the next token.
// A drafted id outside [0, vocab) is rejected; a rejection whose residual has no mass draws from
// p_j instead (same uniform); out_next = -1 only when that row has no mass at all.
void speculative_accept(const float* p, const float* q, std::int64_t k, std::int64_t vocab,
                        const std::int32_t* drafted, const double* uniforms,
                        std::int32_t* out_accepted, std::int32_t* out_next, cudaStream_t stream);

// --- vocab-shard walks (device-side verification, backend/cuda_shard_reductions.hpp) -----------
// The per-shard halves of the local-reduction verifier on rows left in device memory; each writes
// a few scalars to device memory, so only those cross to the host. Semantics are those of
// backend/logit_statistics.hpp (the plain reference), evaluated by one block of kWalkThreads per
// row: every thread owns a contiguous id segment and sums its weights in double in ascending ids,
// the segment sums are added in segment order, and the thread whose segment holds the target
// walks it ascending. Sums therefore agree with the sequential CPU sums to rounding (~1e-15
// relative) and draws agree except within that rounding of a boundary.
inline constexpr int kWalkThreads = 512;
// The most ids one logits_at call takes (passed by value in the launch: no upload).
inline constexpr int kMaxQueriedIds = 64;
// out[r] = rows[r][ids[r] − vocab_begin] when ids[r] lies in this shard, NaN otherwise, for
// r < ids.size() (rows of `vocab_local` floats).
void logits_at(const float* rows, std::int64_t vocab_local, std::int64_t vocab_begin,
               std::span<const std::int32_t> ids, float* out, cudaStream_t stream);
// A draw from one shard row's softmax at 1/T (decode walk_softmax): the first id whose running
// Σ exp(l/T − m) exceeds `target`, where m = stats->max (the shard's row_stats record, read on the
// device); the last id of positive weight when rounding leaves the target unreached; id -1 when
// the shard has no mass. Writes the global id and its unscaled logit.
struct DrawRecord {
  std::int32_t id = -1;
  float logit = 0.0f;
};
void walk_softmax(const float* row, std::int64_t vocab_local, std::int64_t vocab_begin,
                  double inv_temperature, const RowStatsRecord* stats, double target,
                  DrawRecord* out, cudaStream_t stream);
// Speculative sampling's residual over one shard (decode residual_mass / walk_residual): weights
// max(0, p(x) − q(x)) with p(x) = exp(p_row[x]/T − p_max) / p_sum, q likewise.
struct ResidualPair {
  double p_max = 0.0, p_sum = 1.0;
  double q_max = 0.0, q_sum = 1.0;
  double inv_temperature = 1.0;
};
void residual_mass(const float* p_row, const float* q_row, std::int64_t vocab_local,
                   const ResidualPair& pair, double* out, cudaStream_t stream);
void walk_residual(const float* p_row, const float* q_row, std::int64_t vocab_local,
                   std::int64_t vocab_begin, const ResidualPair& pair, double target,
                   DrawRecord* out, cudaStream_t stream);

// The number of CUDA devices visible (0 when no driver or device; never throws).
int device_count();

}  // namespace selfspec::kernels::cuda
