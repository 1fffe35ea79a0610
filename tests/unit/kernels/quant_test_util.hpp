// Random GGUF-encoded weights for the packed-weight and quantized-matmul tests: rows of whole
// ggml blocks with random quants and finite random scales, in every quantized format.
#pragma once

#include "core/dtype.hpp"
#include "core/weight_format.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"
#include "kernels/cpu/packed_weights.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

namespace selfspec::kernels::cpu::test {

// The byte offsets of a block's f16 scales (d, and m/dmin where the format has one).
inline std::vector<int> f16_fields(WeightFormat format) {
  switch (format) {
    case WeightFormat::kQ4_0:
    case WeightFormat::kQ5_0:
    case WeightFormat::kQ8_0:
      return {0};
    case WeightFormat::kQ6_K:
      return {208};
    default:
      return {0, 2};
  }
}

// `rows` rows of `blocks` random blocks each, row-major.
struct GgufMatrix {
  WeightFormat format = WeightFormat::kQ4_0;
  std::int64_t rows = 0;
  std::int64_t blocks = 0;
  std::int64_t row_bytes = 0;
  std::int64_t block_elems = 0;
  std::vector<std::byte> data;

  const std::byte* row(std::int64_t r) const { return data.data() + r * row_bytes; }
  std::int64_t cols() const { return blocks * block_elems; }
  // Row r dequantized by ggml_dequantize (the file's values).
  std::vector<float> dequantized_row(std::int64_t r) const {
    std::vector<float> out(static_cast<std::size_t>(cols()));
    dequantize_ggml(ggml_type_of(format), std::span(row(r), static_cast<std::size_t>(row_bytes)),
                    out);
    return out;
  }
};

// Scales of magnitude up to `scale` (f16), either sign, so weights are of order scale x quant.
inline GgufMatrix random_gguf_matrix(std::mt19937& rng, WeightFormat format, std::int64_t rows,
                                     std::int64_t blocks, float scale = 0.02f) {
  GgufMatrix m;
  m.format = format;
  m.rows = rows;
  m.blocks = blocks;
  const GgmlType type = ggml_type_of(format);
  m.block_elems = ggml_block_elements(type);
  const std::int64_t block_bytes = ggml_block_bytes(type);
  m.row_bytes = blocks * block_bytes;
  m.data.resize(static_cast<std::size_t>(rows * m.row_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> value(-scale, scale);
  for (std::byte& b : m.data) b = static_cast<std::byte>(byte(rng));
  for (std::int64_t b = 0; b < rows * blocks; ++b) {
    std::byte* block = m.data.data() + b * block_bytes;
    for (const int offset : f16_fields(format)) {
      const std::uint16_t bits = f32_to_f16(value(rng));
      std::memcpy(block + offset, &bits, sizeof bits);
    }
  }
  return m;
}

}  // namespace selfspec::kernels::cpu::test
