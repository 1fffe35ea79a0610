// Synthetic weights stored quantized: seeded random GGUF blocks for the matrices of a synthetic
// model, so a 7B- or 70B-geometry model runs its quantized kernels (a Q4_K decode bench on a GPU)
// without a file and without quantizing 70 billion values. Each block is a function of
// (key, row, block index) alone, so every rank's slice is produced without the rest, like the
// dense synthetic weights. The quants are uniform random bits; the f16 scales are set so that the
// values' standard deviation is the tensor's (SyntheticModelSpec's initialisation) and, for the
// formats with a minimum, their mean is about zero. The values carry no knowledge: they exist to
// be streamed.
#pragma once

#include "core/dtype.hpp"
#include "core/weight_format.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/tensor_source.hpp"

#include <cstdint>
#include <vector>

namespace selfspec {

// The blocks of the rows [row_begin, row_end) covering the columns [col_begin, col_end) (on
// 32-column boundaries) of a [rows × cols] matrix in `format` (cols whole blocks of it), with
// values of standard deviation `std`.
QuantizedSlice synthetic_quantized_slice(WeightFormat format, std::uint64_t key, double std,
                                         std::int64_t rows, std::int64_t cols,
                                         const TensorSlice& slice);

// The same slice's values as f32 (the blocks dequantized), into dst [rows × cols of the slice] as
// dst_dtype.
void synthetic_quantized_values(WeightFormat format, std::uint64_t key, double std,
                                std::int64_t rows, std::int64_t cols, const TensorSlice& slice,
                                DType dst_dtype, void* dst);

}  // namespace selfspec
