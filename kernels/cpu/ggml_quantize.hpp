// Quantization of f32 values into ggml's block formats (the inverse of ggml_dequantize.hpp): F32,
// F16, BF16 (plain conversion), Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (blocks of 32) and Q4_K, Q5_K, Q6_K
// (super-blocks of 256).
//
// What it is for: exporting synthetic and test models as quantized GGUF files (`selfspec
// make-model --gguf --gguf-type q4_k`, add_model_to_gguf), so that tests exercise the engine's
// native quantized kernels on small models made on the fly, with nothing downloaded. It is not a
// replacement for llama.cpp's quantize tool: there is no importance matrix, and the K formats use
// a simpler scale choice than ggml's make_qkx2_quants / make_qx_quants search, so their error is
// somewhat larger than llama.cpp's (still within half a quantization step of every element).
//
// Methods:
//   * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 follow ggml's reference quantizers (ggml-quants.c
//     quantize_row_*_ref, gguf-py's quants.py) operation for operation, so for finite inputs the
//     bytes equal theirs: the symmetric types take d = m / -8 (Q4_0) or m / -16 (Q5_0), m the
//     value of largest magnitude (first one on ties), and q = min(top, trunc(x / d + 8.5 or 16.5));
//     Q8_0 takes d = max|x| / 127 and q = roundf(x / d); the types with a min take d = (max - min)
//     / 15 or 31 and q = trunc((x - min) / d + 0.5). The quants use the f32 d, which is then
//     rounded to f16 as ggml does.
//   * Q4_K / Q5_K: each 32-element sub-block wants a min m' = -min(0, min x) and a step
//     (max x + m') / 15 (or 31). The super-block's f16 dmin and d are the smallest f16 values
//     whose 63 multiples reach the largest m' and step, and each sub-block's 6-bit min and scale
//     are the smallest multiples of dmin and d that reach its own m' and step (rounded up, not to
//     nearest, so the sub-block's range [-dmin * m, -dmin * m + 15 d * sc] covers all its values:
//     nothing is clipped and every element is within half a step d * sc of its value).
//     q = clamp(nearest((x + dmin * m) / (d * sc)), 0, 15 or 31); a zero step gives q = 0.
//   * Q6_K: each 16-element sub-block wants the step m / -32 (m its value of largest magnitude,
//     so m is exactly level -32); the f16 d is the smallest whose 127 multiple reaches the largest
//     step magnitude, the int8 scale is the smallest multiple of d that reaches the step's
//     magnitude (rounded up as above), with the step's sign, and q = clamp(nearest(x / (d * sc)) +
//     32, 0, 63). As in Q4_0, only values near -m (level +32 does not exist) clip to +31.
// The bits are packed exactly as dequantize_ggml reads them (ggml-common.h's layouts).
#pragma once

#include "kernels/cpu/ggml_dequantize.hpp"

#include <cstddef>
#include <span>

namespace selfspec {

// Whether quantize_ggml writes `type`: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
// Q6_K (not Q2_K or Q3_K).
bool ggml_quantize_supported(GgmlType type);

// Quantizes src (a whole number of `type`'s blocks) into dst, which must hold exactly
// ggml_row_bytes(type, src.size()) bytes. Single-threaded; blocks are independent, so callers may
// split the work at block boundaries (rows, say). Throws selfspec::Error naming the type and the
// sizes when they do not fit, for an unsupported type, for a non-finite value in a quantized type,
// and when a block's f16 scale or min would overflow (values of magnitude beyond 65504 for Q4_1 /
// Q5_1, whose min is an f16; beyond about 5e5 for Q4_0, further for the others).
void quantize_ggml(GgmlType type, std::span<const float> src, std::span<std::byte> dst);

}  // namespace selfspec
