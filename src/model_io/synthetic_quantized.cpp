#include "model_io/synthetic_quantized.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"
#include "kernels/cpu/packed_weights.hpp"

#include <algorithm>
#include <cstring>

namespace selfspec {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The f16 fields of a block (byte offsets) and their values for a weight deviation `std`: the
// scale d (and the min or dmin) such that the dequantized values have about that deviation and,
// with a min, a mean of about zero (the quants and 6-bit scales being uniform; see the header).
struct ScaleFields {
  int d_offset = 0;
  int m_offset = -1;
  float d = 0.0f;
  float m = 0.0f;
};

ScaleFields scale_fields(WeightFormat format, double std) {
  switch (format) {
    case WeightFormat::kQ4_0:
      return {0, -1, static_cast<float>(std / 4.61), 0.0f};
    case WeightFormat::kQ5_0:
      return {0, -1, static_cast<float>(std / 9.23), 0.0f};
    case WeightFormat::kQ8_0:
      return {0, -1, static_cast<float>(std / 73.9), 0.0f};
    case WeightFormat::kQ4_1: {
      const auto d = static_cast<float>(std / 4.61);
      return {0, 2, d, -7.5f * d};
    }
    case WeightFormat::kQ5_1: {
      const auto d = static_cast<float>(std / 9.23);
      return {0, 2, d, -15.5f * d};
    }
    case WeightFormat::kQ4_K: {
      const auto d = static_cast<float>(std / 262.0);
      return {0, 2, d, 7.5f * d};
    }
    case WeightFormat::kQ5_K: {
      const auto d = static_cast<float>(std / 534.0);
      return {0, 2, d, 15.5f * d};
    }
    case WeightFormat::kQ6_K:
      return {208, -1, static_cast<float>(std / 1367.0), 0.0f};
    default:
      fail("synthetic quantized weights: {} is not quantized", weight_format_name(format));
  }
}

void write_f16(std::byte* p, float value) {
  const std::uint16_t bits = f32_to_f16(value);
  std::memcpy(p, &bits, sizeof bits);
}

// Block `block` of row `row`: random bits, then its scales.
void fill_block(std::uint64_t key, std::int64_t row, std::int64_t blocks_per_row,
                std::int64_t block, const ScaleFields& scales, std::int64_t block_bytes,
                std::byte* out) {
  std::uint64_t state =
      splitmix64(key ^ splitmix64(static_cast<std::uint64_t>(row * blocks_per_row + block)));
  for (std::int64_t i = 0; i < block_bytes; i += 8) {
    state = splitmix64(state);
    std::memcpy(out + i, &state,
                static_cast<std::size_t>(std::min<std::int64_t>(8, block_bytes - i)));
  }
  write_f16(out + scales.d_offset, scales.d);
  if (scales.m_offset >= 0) write_f16(out + scales.m_offset, scales.m);
}

}  // namespace

QuantizedSlice synthetic_quantized_slice(WeightFormat format, std::uint64_t key, double std,
                                         std::int64_t rows, std::int64_t cols,
                                         const TensorSlice& slice) {
  const GgmlType type = kernels::cpu::ggml_type_of(format);
  const std::int64_t block_elems = ggml_block_elements(type);
  const std::int64_t block_bytes = ggml_block_bytes(type);
  SELFSPEC_CHECK(cols % block_elems == 0, "synthetic {} matrix of {} columns: not whole blocks",
                 weight_format_name(format), cols);
  SELFSPEC_CHECK(
      slice.row_begin >= 0 && slice.row_begin <= slice.row_end && slice.row_end <= rows &&
          slice.col_begin >= 0 && slice.col_begin < slice.col_end && slice.col_end <= cols &&
          slice.col_begin % 32 == 0 && slice.col_end % 32 == 0,
      "synthetic {} matrix [{} x {}]: bad slice", weight_format_name(format), rows, cols);
  const std::int64_t first_block = slice.col_begin / block_elems;
  const std::int64_t last_block = (slice.col_end + block_elems - 1) / block_elems;
  QuantizedSlice out;
  out.format = format;
  out.rows = slice.row_end - slice.row_begin;
  out.cols = slice.col_end - slice.col_begin;
  out.skip = slice.col_begin - first_block * block_elems;
  out.row_stride = (last_block - first_block) * block_bytes;
  out.data.resize(static_cast<std::size_t>(out.rows * out.row_stride));
  const ScaleFields scales = scale_fields(format, std);
  const std::int64_t blocks_per_row = cols / block_elems;
  parallel_for(out.rows, 64, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      for (std::int64_t b = first_block; b < last_block; ++b) {
        fill_block(key, slice.row_begin + r, blocks_per_row, b, scales, block_bytes,
                   out.data.data() + r * out.row_stride + (b - first_block) * block_bytes);
      }
    }
  });
  return out;
}

void synthetic_quantized_values(WeightFormat format, std::uint64_t key, double std,
                                std::int64_t rows, std::int64_t cols, const TensorSlice& slice,
                                DType dst_dtype, void* dst) {
  const GgmlType type = kernels::cpu::ggml_type_of(format);
  const std::int64_t block_elems = ggml_block_elements(type);
  // The covering blocks of whole 32-column groups, then the slice's columns of them.
  TensorSlice groups = slice;
  groups.col_begin = slice.col_begin / 32 * 32;
  groups.col_end = (slice.col_end + 31) / 32 * 32;
  const QuantizedSlice blocks = synthetic_quantized_slice(format, key, std, rows, cols, groups);
  const std::int64_t covered = blocks.row_stride / ggml_block_bytes(type) * block_elems;
  const std::int64_t width = slice.col_end - slice.col_begin;
  const std::int64_t offset = blocks.skip + (slice.col_begin - groups.col_begin);
  parallel_for(blocks.rows, 16, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> values(static_cast<std::size_t>(covered));
    for (std::int64_t r = begin; r < end; ++r) {
      dequantize_ggml(type,
                      std::span(blocks.data.data() + r * blocks.row_stride,
                                static_cast<std::size_t>(blocks.row_stride)),
                      values);
      for (std::int64_t c = 0; c < width; ++c) {
        store_from_f32(dst_dtype, dst, static_cast<std::size_t>(r * width + c),
                       values[static_cast<std::size_t>(offset + c)]);
      }
    }
  });
}

}  // namespace selfspec
