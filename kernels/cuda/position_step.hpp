// The attention sublayer's position step (RoPE on q and k, then k and v into the KV cache) as the
// epilogue of the Q|K|V GEMV: the RoPE form of the CUDA-core GEMV (matmul_small_batch.cu) and of
// the quantized GEMV (quant_matmul.cu). Shared by the kernels and the CPU tests
// (`__host__ __device__`): tests/unit/backend/quant_tile_plan_test.cpp runs the quantized tile's
// RoPE form through it on reference products and compares q and the cache with the CPU's RoPE
// and cache write; tests/gpu hold both GEMVs' RoPE forms to rope_write_kv on a GPU.
//
// Rotate-half RoPE (kernels/cpu/rope.hpp; RoFormer, Su et al. 2021, eq. 34, in HuggingFace's
// rotate-half layout) mixes rows i and i + d/2 of each head, so a GEMV that owns both rows of a
// pair can rotate them before they leave its registers: the RoPE form gives each unit (warp or
// tile) head pairs, pair p being rows head_pair_row(p) and head_pair_row(p) + d/2, its first
// rows the pairs' first rows and its last rows the second ones, as the SwiGLU form pairs gate and
// up rows. The values are the products matmul_many gives (the GEMVs' per-row arithmetic does not
// depend on which rows share a unit), then rope_rotate with the table's cos and sin, then the
// cache's rounding: the bits of matmul_many followed by rope_write_kv. Wq's rotated rows go to
// q; Wk's and Wv's rows go only into the cache, never into an f32 buffer.
#pragma once

#include "core/dtype.hpp"
#include "kernels/host_device.hpp"
#include "kernels/shared_math.hpp"

#include <cstdint>
#include <string>

namespace selfspec::kernels::cuda {

// Element `index` of a KV cache tensor of `dtype` (f32 or bf16) set to `value` (bf16: rounded by
// shared_math.hpp's float_to_bf16_bits, the host's rounding).
SELFSPEC_HOST_DEVICE inline void store_kv(void* cache, DType dtype, std::int64_t index,
                                          float value) {
  if (dtype == DType::kBF16) {
    static_cast<std::uint16_t*>(cache)[index] = float_to_bf16_bits(value);
  } else {
    static_cast<float*>(cache)[index] = value;
  }
}

// What a matrix of the RoPE form does with its head pairs.
enum class HeadOutput : std::int32_t {
  kRotated = 0,           // Wq: rotated, into q [T][rows]
  kRotatedIntoCache = 1,  // Wk: rotated, into the key cache
  kIntoCache = 2,         // Wv: into the value cache as computed
};

// The launch-wide operands of the position step (device memory on the GPU). Token t of the launch
// is token first_token + t of the pass: its position positions[first_token + t], its cache slot
// n_past + first_token + t (n_past read from the step parameters when the kernel starts).
struct PositionStep {
  float* q = nullptr;
  std::int64_t q_rows = 0;  // floats per token row of q (Wq's rows)
  void* k_cache = nullptr;  // [kv_heads][capacity][head_dim] of kv_dtype
  void* v_cache = nullptr;
  std::int64_t capacity = 0;
  DType kv_dtype = DType::kF32;
  std::int64_t head_dim = 0;
  const std::int32_t* positions = nullptr;
  const float* table = nullptr;  // the RoPE table (kernels/cpu/rope.hpp), table_positions rows
  std::int64_t table_positions = 0;
  std::int64_t first_token = 0;
};

// The first row of head pair `pair` (its second row is head_dim / 2 further): pair p is element
// p mod (d/2) of head p div (d/2). Pairs past the matrix's give rows past it.
SELFSPEC_HOST_DEVICE constexpr std::int64_t head_pair_row(std::int64_t pair,
                                                          std::int64_t head_dim) {
  const std::int64_t half = head_dim / 2;
  return (pair / half) * head_dim + pair % half;
}

// Stores head pair `pair` of token t (of the launch) of a matrix doing `output`: its two products
// `first` and `second`, rotated where the output is, at the token's position, into q or the
// cache. As rope_write_kv: a token whose position is outside the table is neither rotated nor
// written to the cache (its q row keeps the products), and a slot outside the cache is not
// written.
SELFSPEC_HOST_DEVICE inline void store_head_pair(const PositionStep& s, HeadOutput output,
                                                 std::int64_t n_past, std::int64_t t,
                                                 std::int64_t pair, float first, float second) {
  const std::int64_t half = s.head_dim / 2;
  const std::int64_t head = pair / half;
  const std::int64_t i = pair - head * half;
  const std::int64_t token = s.first_token + t;
  const std::int64_t position = s.positions[token];
  const bool in_table = position >= 0 && position < s.table_positions;
  if (in_table && output != HeadOutput::kIntoCache) {
    const float* cos_sin = s.table + position * s.head_dim;
    const RopePair rotated = rope_rotate(first, second, cos_sin[i], cos_sin[half + i]);
    first = rotated.first;
    second = rotated.second;
  }
  if (output == HeadOutput::kRotated) {
    float* row = s.q + token * s.q_rows + head * s.head_dim;
    row[i] = first;
    row[i + half] = second;
    return;
  }
  const std::int64_t slot = n_past + token;
  if (!in_table || slot < 0 || slot >= s.capacity) return;
  void* cache = output == HeadOutput::kRotatedIntoCache ? s.k_cache : s.v_cache;
  const std::int64_t dst = (head * s.capacity + slot) * s.head_dim + i;
  store_kv(cache, s.kv_dtype, dst, first);
  store_kv(cache, s.kv_dtype, dst + half, second);
}

// Why a RoPE-form launch cannot run, empty when it can (host side): outputs (HeadMatmul or
// QuantHeadMatmul) are 1 to 4 matrices of one cols whose rows are whole heads, head_dim a positive
// multiple of `head_dim_multiple` (a unit's pairs in one head), Wq's rows the q rows, and the
// pointers each output needs set.
template <class Outputs>
std::string position_step_problem(const Outputs& outputs, const PositionStep& s,
                                  bool has_step_params, std::int64_t head_dim_multiple) {
  if (outputs.empty() || outputs.size() > 4) return "1 to 4 matrices in one launch";
  if (s.head_dim <= 0 || s.head_dim % head_dim_multiple != 0) {
    return "head_dim " + std::to_string(s.head_dim) + " is not a positive multiple of " +
           std::to_string(head_dim_multiple);
  }
  if (!has_step_params || s.positions == nullptr || s.table == nullptr || s.table_positions <= 0) {
    return "no step parameters, positions or RoPE table";
  }
  for (const auto& out : outputs) {
    if (out.w.data == nullptr || out.w.rows <= 0 || out.w.rows % s.head_dim != 0 ||
        out.w.cols != outputs.front().w.cols) {
      return "a matrix of " + std::to_string(out.w.rows) + " x " + std::to_string(out.w.cols) +
             " is not whole heads of " + std::to_string(s.head_dim) + " of the launch's columns";
    }
    if (out.output == HeadOutput::kRotated && (s.q == nullptr || s.q_rows != out.w.rows)) {
      return "q of " + std::to_string(s.q_rows) + " floats a row for Wq's " +
             std::to_string(out.w.rows) + " rows";
    }
    if (out.output != HeadOutput::kRotated &&
        (s.k_cache == nullptr || s.v_cache == nullptr || s.capacity <= 0 ||
         (s.kv_dtype != DType::kF32 && s.kv_dtype != DType::kBF16))) {
      return "no KV cache (f32 or bf16) for Wk and Wv";
    }
  }
  return {};
}

}  // namespace selfspec::kernels::cuda
