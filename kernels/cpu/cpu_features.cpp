// Instruction-set detection and override for the CPU kernels.
//
// detected_isa() asks cpuid once (via __builtin_cpu_supports, which also checks that the OS saves
// the YMM/ZMM state): AVX2 + FMA + F16C, then AVX-512 F/BW/VL/DQ + VNNI + BF16. The active ISA is,
// in order of precedence: the value set by force_isa() (an atomic, so tests and benchmarks may
// switch at any time between kernel calls), SELFSPEC_CPU_ISA=scalar|avx2|avx512 from the
// environment (read once), or the detected ISA. Asking for an ISA the CPU lacks is an error rather
// than a silent fallback.
#include "kernels/cpu/cpu_features.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>

namespace selfspec::kernels::cpu {
namespace {

constexpr int kNotForced = -1;
std::atomic<int> g_forced_isa{kNotForced};

Isa detect() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0 &&
                    __builtin_cpu_supports("f16c") != 0;
  if (!avx2) return Isa::kScalar;
  const bool avx512 =
      __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
      __builtin_cpu_supports("avx512vl") != 0 && __builtin_cpu_supports("avx512dq") != 0 &&
      __builtin_cpu_supports("avx512vnni") != 0 && __builtin_cpu_supports("avx512bf16") != 0;
  return avx512 ? Isa::kAvx512 : Isa::kAvx2;
}

void check_supported(Isa isa, std::string_view origin) {
  if (!isa_supported(isa)) {
    fail("{} requests the {} kernels, but this CPU lacks {}", origin, isa_name(isa),
         isa == Isa::kAvx2 ? "AVX2, FMA or F16C" : "one of AVX-512 F, BW, VL, DQ, VNNI and BF16");
  }
}

// The ISA chosen by the environment, or the detected one. A bad value throws on every call (the
// static is only initialised once the lambda returns normally).
Isa environment_isa() {
  static const Isa isa = [] {
    const char* env = std::getenv("SELFSPEC_CPU_ISA");
    if (env == nullptr || *env == '\0') return detected_isa();
    std::string value(env);
    std::transform(value.begin(), value.end(), value.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    Isa chosen = Isa::kScalar;
    if (value == "scalar") {
      chosen = Isa::kScalar;
    } else if (value == "avx2") {
      chosen = Isa::kAvx2;
    } else if (value == "avx512") {
      chosen = Isa::kAvx512;
    } else {
      fail("SELFSPEC_CPU_ISA must be 'scalar', 'avx2' or 'avx512' (got '{}')", env);
    }
    check_supported(chosen, "SELFSPEC_CPU_ISA");
    return chosen;
  }();
  return isa;
}

}  // namespace

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() {
  const int forced = g_forced_isa.load(std::memory_order_relaxed);
  if (forced != kNotForced) return static_cast<Isa>(forced);
  return environment_isa();
}

void force_isa(Isa isa) {
  check_supported(isa, "force_isa()");
  g_forced_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

bool isa_supported(Isa isa) {
  return static_cast<int>(isa) <= static_cast<int>(detected_isa());
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

}  // namespace selfspec::kernels::cpu
