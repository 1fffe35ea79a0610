// Runtime dispatch between the AVX2/FMA/F16C kernels and the portable scalar fallback.
// The instruction set is detected once (cpuid); SELFSPEC_CPU_ISA=scalar forces the fallback and
// tests switch explicitly with force_isa(). Both paths compute every reduction in the same order,
// so they produce bit-identical results (see matmul.hpp).
#pragma once

#include <string_view>

namespace selfspec::kernels::cpu {

enum class Isa { kScalar, kAvx2 };

// The best instruction set this CPU supports (ignores any override).
Isa detected_isa();
// The instruction set kernels use now: detected, unless overridden by SELFSPEC_CPU_ISA or
// force_isa().
Isa active_isa();
// Overrides the active instruction set (tests, benchmarks). Throws selfspec::Error when the CPU
// does not support it.
void force_isa(Isa isa);
std::string_view isa_name(Isa isa);

}  // namespace selfspec::kernels::cpu
