// Internal entry points of the vectorised elementwise kernels (elementwise_avx2.cpp,
// elementwise_avx512.cpp), dispatched by elementwise.cpp and attention.cpp; each equals the scalar
// form of vector_exp.hpp bit for bit. Baseline declarations: call only on a CPU with the ISA.
#pragma once

#include <cstdint>

namespace selfspec::kernels::cpu::detail {

// out[i] = swiglu_canonical(gate[i], up[i]).
void swiglu_avx2(const float* gate, const float* up, float* out, std::int64_t n);
void swiglu_avx512(const float* gate, const float* up, float* out, std::int64_t n);
// x[i] = exp_canonical(x[i] - shift).
void exp_shifted_avx2(float* x, float shift, std::int64_t n);
void exp_shifted_avx512(float* x, float shift, std::int64_t n);

}  // namespace selfspec::kernels::cpu::detail
