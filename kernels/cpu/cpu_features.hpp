// Runtime dispatch between the kernels' instruction sets, a ladder where each rung includes the one
// below: the portable scalar fallback; AVX2/FMA/F16C; AVX-512 (F, BW, VL, DQ with VNNI and BF16:
// vpdpbusd for quantized weights, vdpbf16ps for bf16 weights). The best one the CPU supports is
// detected once (cpuid); SELFSPEC_CPU_ISA=scalar|avx2|avx512 picks a lower one and tests switch
// explicitly with force_isa(). Every path computes every reduction in the same order, so all of
// them produce bit-identical results (matmul.hpp, quant_matmul.hpp). Kernels without an AVX-512
// version (f32/f16 weights, attention) run their AVX2 code on the avx512 rung.
#pragma once

#include <string_view>

namespace selfspec::kernels::cpu {

enum class Isa { kScalar, kAvx2, kAvx512 };

// The best instruction set this CPU supports (ignores any override).
Isa detected_isa();
// The instruction set kernels use now: detected, unless overridden by SELFSPEC_CPU_ISA or
// force_isa().
Isa active_isa();
// Overrides the active instruction set (tests, benchmarks). Throws selfspec::Error when the CPU
// does not support it.
void force_isa(Isa isa);
// True when the CPU supports `isa` (it is at or below the detected rung).
bool isa_supported(Isa isa);
std::string_view isa_name(Isa isa);

}  // namespace selfspec::kernels::cpu
