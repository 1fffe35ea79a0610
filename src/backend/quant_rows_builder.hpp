// The CUDA backend's quantized rows (kernels/cuda/quant_rows.hpp) on the host: built from a GGUF
// slice's blocks with the values the CPU's packed form holds (kernels/cpu/packed_weights.hpp
// decode_gguf_row, held equal to decode_quant_row of the packed slice), so both backends run on
// the same values; rows selected from them (a draft vocabulary's LM head); and the
// scalar reference of their product and dequantization - the canonical sequence, one row at a
// time - which the CPU tests hold equal to the CPU kernels and the GPU tests to the CUDA kernels,
// bit for bit. Pure C++: it builds and is tested without CUDA.
#pragma once

#include "backend/backend.hpp"
#include "kernels/cuda/quant_rows.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace selfspec {

// The quantized rows of a GGUF slice (host.format quantized; throws on a malformed block, as the
// CPU packing does, naming the row and column).
std::vector<std::byte> build_quant_rows(const HostWeight& host);
// Bytes of build_quant_rows(host).
std::size_t quant_rows_bytes(const HostWeight& host);
// The same bytes into `out` (quant_rows_bytes(host) of them, whatever it held before): every byte
// written, the layout's padding zeroed, by all the threads - so a loader that reuses one host
// buffer for every matrix neither zero-fills nor faults in fresh pages on one thread per matrix
// (a 70B-geometry Q4_K load builds about 40 GB of rows).
void build_quant_rows_into(const HostWeight& host, std::span<std::byte> out);

// A new matrix of the given rows of `rows_bytes` (a matrix build_quant_rows made), in that order.
std::vector<std::byte> select_quant_rows(std::span<const std::byte> rows_bytes,
                                         std::span<const std::int32_t> rows);

// y[t][n] = row n times token t of x [tokens × cols] by the canonical sequence, the activations
// quantized as kernels/cpu/quant_matmul.hpp says; y is [tokens × rows].
void reference_quant_matmul(std::span<const std::byte> rows_bytes, const float* x,
                            std::int64_t tokens, float* y);

// The integer sums of one group (quant_rows.hpp's QuantGroupSums): its stored values, `quants` as
// the layout l stores them, against 32 quantized activations xq.
kernels::cuda::QuantGroupSums reference_group_sums(const kernels::cuda::QuantRowsLayout& l,
                                                   const std::byte* quants, const std::int8_t* xq);

// Row `row` dequantized (ggml's values) into out[cols].
void reference_quant_dequantize_row(std::span<const std::byte> rows_bytes, std::int64_t row,
                                    float* out);

}  // namespace selfspec
