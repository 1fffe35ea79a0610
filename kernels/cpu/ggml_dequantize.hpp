// ggml tensor types and their dequantization to f32 (the block layouts of llama.cpp's
// ggml-common.h / ggml-quants.c: F32, F16, BF16; Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 in blocks of 32;
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K in super-blocks of 256). The loader dequantizes with it when a
// tensor is converted to a dense dtype (--weights-dtype f32/bf16/f16, or a type with no native
// kernel); the embedding rows of packed weights are read through it too. The types with native
// kernels run as stored (packed_weights.hpp, quant_matmul.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace selfspec {

// The numbers are ggml's type ids (ggml.h enum ggml_type).
enum class GgmlType : std::uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

// Every supported type: the float types, the types in blocks of 32, then those in super-blocks of
// 256 (error messages list them in this order).
inline constexpr GgmlType kSupportedGgmlTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1,
    GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
};

// A supported type from its raw id; nullopt for any other id (known to ggml or not).
std::optional<GgmlType> ggml_type_from_id(std::uint32_t id);
// "F32", "Q4_K", ...; for an unsupported id its ggml name when it has one ("Q8_1", "IQ2_XXS"),
// else "type <id>". The view stays valid for the life of the process (past 1024 distinct ids ggml
// does not know, such ids are all named "type (unknown id)").
std::string_view ggml_type_name(std::uint32_t id);
inline std::string_view ggml_type_name(GgmlType type) {
  return ggml_type_name(static_cast<std::uint32_t>(type));
}
// Elements per block (1 for F32/F16/BF16, 32, or 256) and bytes per block.
std::int64_t ggml_block_elements(GgmlType type);
std::int64_t ggml_block_bytes(GgmlType type);
// Bytes of `n` elements; throws selfspec::Error unless n is a non-negative multiple of the block
// size whose byte count fits 64 bits.
std::uint64_t ggml_row_bytes(GgmlType type, std::int64_t n);

// Dequantizes dst.size() elements (a multiple of the block size) from src, which must hold
// exactly ggml_row_bytes(type, dst.size()) bytes. Throws selfspec::Error on a size mismatch.
// Optimised (single-threaded: callers parallelise over rows or blocks), and equal bit for bit to
// dequantize_ggml_reference. Values are bit-identical to ggml's dequantize_row_* and gguf-py's.
void dequantize_ggml(GgmlType type, std::span<const std::byte> src, std::span<float> dst);
// The plain reference: one element at a time, straight from the block layout.
void dequantize_ggml_reference(GgmlType type, std::span<const std::byte> src, std::span<float> dst);

}  // namespace selfspec
