// quantize_ggml (see ggml_quantize.hpp for the methods). Compiled with -ffp-contract=off
// (kernels/cpu/CMakeLists.txt) so that the 32-block quantizers round as ggml's reference does
// (x * id + 8.5f is a multiply, then an add) whatever the build flags. Little-endian host, as in
// ggml_dequantize.cpp.
#include "kernels/cpu/ggml_quantize.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace selfspec {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF data is little-endian");

void store_u16(std::byte* p, std::uint16_t v) {
  std::memcpy(p, &v, sizeof v);
}

// `value` as an f16 scale field; throws when it overflows f16.
std::uint16_t f16_scale(float value, std::string_view type) {
  const std::uint16_t bits = f32_to_f16(value);
  SELFSPEC_CHECK((bits & 0x7C00u) != 0x7C00u,
                 "quantize {}: a block scale of {} does not fit f16 (the values are too large "
                 "for this format)",
                 type, value);
  return bits;
}

// The smallest non-negative f16 d with d * `levels` >= `need` (need >= 0, finite): the
// super-block scale of Q4_K / Q5_K (levels 63) and Q6_K (127), rounded up so that the largest
// sub-block scale fits. d * levels is exact in f32 (11 + 7 significant bits).
std::uint16_t f16_covering(float need, float levels, std::string_view type) {
  std::uint16_t bits = f16_scale(need / levels, type);
  while (f16_to_f32(bits) * levels < need) {
    ++bits;  // the next f16 up (bits is non-negative and finite)
    SELFSPEC_CHECK(bits < 0x7C00u,
                   "quantize {}: a super-block scale for {} does not fit f16 (the values are too "
                   "large for this format)",
                   type, need);
  }
  return bits;
}

// The smallest multiple count k in 0..max_k with unit * k >= need (need >= 0; unit * max_k >=
// need, as f16_covering makes it). unit * k is exact in f32.
int multiples_covering(float need, float unit, int max_k) {
  if (need <= 0.0f || unit <= 0.0f) return 0;
  int k = std::clamp(static_cast<int>(std::ceil(need / unit)), 0, max_k);
  while (k < max_k && unit * static_cast<float>(k) < need) ++k;
  while (k > 0 && unit * static_cast<float>(k - 1) >= need) --k;
  return k;
}

int nearest(float v) {
  return static_cast<int>(std::lround(v));
}

// The value of largest magnitude (the first on ties, as ggml) of x[0..n).
float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Q4_0/Q4_1/Q5_0/Q5_1's 16 quant bytes: byte k holds the low 4 bits of element k (low nibble) and
// of element k + 16 (high nibble).
void pack_low_nibbles(const std::array<std::uint8_t, 32>& q, std::byte* qs) {
  for (int k = 0; k < 16; ++k) {
    qs[k] = static_cast<std::byte>((q[k] & 0xF) | ((q[k + 16] & 0xF) << 4));
  }
}

// Q5_0/Q5_1's qh: bit j (little-endian 32-bit) is the fifth bit of element j.
void pack_fifth_bits(const std::array<std::uint8_t, 32>& q, std::byte* qh) {
  std::uint32_t bits = 0;
  for (int j = 0; j < 32; ++j) bits |= static_cast<std::uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, sizeof bits);
}

// ---------------------------------------------------------------------------------------------
// Blocks of 32: ggml's reference quantizers
// ---------------------------------------------------------------------------------------------

// Q4_0 (levels -8..7) and Q5_0 (-16..15): d = m / -half, q = min(top, trunc(x / d + half + 0.5)).
template <int kHalf>
std::array<std::uint8_t, 32> symmetric_quants(const float* x, float& d) {
  d = signed_absmax(x, 32) / static_cast<float>(-kHalf);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  std::array<std::uint8_t, 32> q;
  for (int j = 0; j < 32; ++j) {
    const float shifted = x[j] * id + (static_cast<float>(kHalf) + 0.5f);
    q[j] = static_cast<std::uint8_t>(std::min(2 * kHalf - 1, static_cast<int>(shifted)));
  }
  return q;
}

// Q4_1 (levels 0..15) and Q5_1 (0..31): d = (max - min) / top, q = min(top, trunc((x - min) / d +
// 0.5)).
template <int kTop>
std::array<std::uint8_t, 32> affine_quants(const float* x, float& d, float& min) {
  min = x[0];
  float max = x[0];
  for (int j = 1; j < 32; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  d = (max - min) / static_cast<float>(kTop);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  std::array<std::uint8_t, 32> q;
  for (int j = 0; j < 32; ++j) {
    const float shifted = (x[j] - min) * id + 0.5f;
    q[j] = static_cast<std::uint8_t>(std::min(kTop, static_cast<int>(shifted)));
  }
  return q;
}

void q4_0_block(const float* x, std::byte* out) {  // {d, qs[16]}
  float d = 0.0f;
  const std::array<std::uint8_t, 32> q = symmetric_quants<8>(x, d);
  store_u16(out, f16_scale(d, "Q4_0"));
  pack_low_nibbles(q, out + 2);
}

void q4_1_block(const float* x, std::byte* out) {  // {d, m, qs[16]}
  float d = 0.0f;
  float min = 0.0f;
  const std::array<std::uint8_t, 32> q = affine_quants<15>(x, d, min);
  store_u16(out, f16_scale(d, "Q4_1"));
  store_u16(out + 2, f16_scale(min, "Q4_1"));
  pack_low_nibbles(q, out + 4);
}

void q5_0_block(const float* x, std::byte* out) {  // {d, qh, qs[16]}
  float d = 0.0f;
  const std::array<std::uint8_t, 32> q = symmetric_quants<16>(x, d);
  store_u16(out, f16_scale(d, "Q5_0"));
  pack_fifth_bits(q, out + 2);
  pack_low_nibbles(q, out + 6);
}

void q5_1_block(const float* x, std::byte* out) {  // {d, m, qh, qs[16]}
  float d = 0.0f;
  float min = 0.0f;
  const std::array<std::uint8_t, 32> q = affine_quants<31>(x, d, min);
  store_u16(out, f16_scale(d, "Q5_1"));
  store_u16(out + 2, f16_scale(min, "Q5_1"));
  pack_fifth_bits(q, out + 4);
  pack_low_nibbles(q, out + 8);
}

void q8_0_block(const float* x, std::byte* out) {  // {d, qs[32] int8}
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(out, f16_scale(d, "Q8_0"));
  for (int j = 0; j < 32; ++j) {
    const auto q = static_cast<std::int8_t>(std::roundf(x[j] * id));
    out[2 + j] = static_cast<std::byte>(q);
  }
}

// ---------------------------------------------------------------------------------------------
// Super-blocks of 256
// ---------------------------------------------------------------------------------------------

// Q4_K / Q5_K's 12 bytes of 6-bit scales and mins (the inverse of ggml's get_scale_min_k4; see
// q4_k_scale_min in ggml_dequantize.cpp): bytes 0-3 hold scales 0-3, bytes 4-7 mins 0-3, in their
// low 6 bits; bytes 8-11 hold the low 4 bits of scale (low nibble) and min (high nibble) 4-7,
// whose top 2 bits go to the top 2 bits of bytes 0-3 (scales) and 4-7 (mins).
void pack_scales_mins(const std::array<int, 8>& sc, const std::array<int, 8>& m, std::byte* out) {
  std::array<std::uint8_t, 12> packed{};
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<std::uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<std::uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
  std::memcpy(out, packed.data(), packed.size());
}

// A Q4_K / Q5_K super-block: its f16 d and dmin, each sub-block's 6-bit scale and min, and the
// 256 quants (0..15 or 0..31).
struct KBlock {
  std::uint16_t d = 0;
  std::uint16_t dmin = 0;
  std::array<int, 8> sc{};
  std::array<int, 8> m{};
  std::array<std::uint8_t, 256> q{};
};

// Q4_K (kTop 15) and Q5_K (31), as in the header.
template <int kTop>
KBlock k_quants(const float* x, std::string_view type) {
  KBlock block;
  std::array<float, 8> need_min{};  // -min(0, min x): the sub-block's offset
  std::array<float, 8> max{};
  float max_need_min = 0.0f;
  for (int s = 0; s < 8; ++s) {
    const float* xs = x + 32 * s;
    float lo = xs[0];
    float hi = xs[0];
    for (int l = 1; l < 32; ++l) {
      lo = std::min(lo, xs[l]);
      hi = std::max(hi, xs[l]);
    }
    need_min[s] = lo < 0.0f ? -lo : 0.0f;
    max[s] = hi;
    max_need_min = std::max(max_need_min, need_min[s]);
  }
  block.dmin = f16_covering(max_need_min, 63.0f, type);
  const float dmin = f16_to_f32(block.dmin);
  std::array<float, 8> offset{};  // dmin * m, >= need_min: the sub-block's range starts at -offset
  std::array<float, 8> need_step{};
  float max_need_step = 0.0f;
  for (int s = 0; s < 8; ++s) {
    block.m[s] = multiples_covering(need_min[s], dmin, 63);
    offset[s] = dmin * static_cast<float>(block.m[s]);
    need_step[s] = std::max(0.0f, (max[s] + offset[s]) / static_cast<float>(kTop));
    max_need_step = std::max(max_need_step, need_step[s]);
  }
  block.d = f16_covering(max_need_step, 63.0f, type);
  const float d = f16_to_f32(block.d);
  for (int s = 0; s < 8; ++s) {
    block.sc[s] = multiples_covering(need_step[s], d, 63);
    const float step = d * static_cast<float>(block.sc[s]);
    for (int l = 0; l < 32; ++l) {
      const int v = step > 0.0f ? nearest((x[32 * s + l] + offset[s]) / step) : 0;
      block.q[32 * s + l] = static_cast<std::uint8_t>(std::clamp(v, 0, kTop));
    }
  }
  return block;
}

// Sub-block pair p (64 elements) shares qs bytes 32p..32p+31: its first sub-block in the low
// nibbles, its second in the high.
void pack_k_nibbles(const std::array<std::uint8_t, 256>& q, std::byte* qs) {
  for (int pair = 0; pair < 4; ++pair) {
    for (int l = 0; l < 32; ++l) {
      const int lo = q[64 * pair + l] & 0xF;
      const int hi = q[64 * pair + 32 + l] & 0xF;
      qs[32 * pair + l] = static_cast<std::byte>(lo | (hi << 4));
    }
  }
}

void q4_k_block(const float* x, std::byte* out) {  // {d, dmin, scales[12], qs[128]}
  const KBlock block = k_quants<15>(x, "Q4_K");
  store_u16(out, block.d);
  store_u16(out + 2, block.dmin);
  pack_scales_mins(block.sc, block.m, out + 4);
  pack_k_nibbles(block.q, out + 16);
}

void q5_k_block(const float* x, std::byte* out) {  // {d, dmin, scales[12], qh[32], qs[128]}
  const KBlock block = k_quants<31>(x, "Q5_K");
  store_u16(out, block.d);
  store_u16(out + 2, block.dmin);
  pack_scales_mins(block.sc, block.m, out + 4);
  // The fifth bit of element l of sub-block s is bit s of qh[l].
  for (int l = 0; l < 32; ++l) {
    int bits = 0;
    for (int s = 0; s < 8; ++s) bits |= ((block.q[32 * s + l] >> 4) & 1) << s;
    out[16 + l] = static_cast<std::byte>(bits);
  }
  pack_k_nibbles(block.q, out + 48);
}

void q6_k_block(const float* x, std::byte* out) {  // {ql[128], qh[64], scales[16] int8, d}
  std::array<float, 16> step_magnitude{};
  std::array<bool, 16> negative{};  // the step's sign: that of m / -32
  float max_step = 0.0f;
  for (int s = 0; s < 16; ++s) {
    const float m = signed_absmax(x + 16 * s, 16);
    step_magnitude[s] = std::fabs(m) / 32.0f;
    negative[s] = m > 0.0f;
    max_step = std::max(max_step, step_magnitude[s]);
  }
  const std::uint16_t d_bits = f16_covering(max_step, 127.0f, "Q6_K");
  const float d = f16_to_f32(d_bits);
  std::array<std::uint8_t, 256> q{};
  std::array<std::int8_t, 16> scales{};
  for (int s = 0; s < 16; ++s) {
    const int magnitude = multiples_covering(step_magnitude[s], d, 127);
    const int sc = negative[s] ? -magnitude : magnitude;
    scales[s] = static_cast<std::int8_t>(sc);
    const float step = d * static_cast<float>(sc);
    for (int l = 0; l < 16; ++l) {
      const int v = step != 0.0f ? nearest(x[16 * s + l] / step) + 32 : 32;
      q[16 * s + l] = static_cast<std::uint8_t>(std::clamp(v, 0, 63));
    }
  }
  // Element 128 * half + 32 * quarter + l: its low 4 bits are the low (quarter 0, 1) or high
  // (quarter 2, 3) nibble of ql[64 * half + 32 * (quarter % 2) + l], its top 2 bits are bits
  // 2 * quarter .. 2 * quarter + 1 of qh[32 * half + l].
  std::array<std::uint8_t, 128> ql{};
  std::array<std::uint8_t, 64> qh{};
  for (int half = 0; half < 2; ++half) {
    for (int quarter = 0; quarter < 4; ++quarter) {
      for (int l = 0; l < 32; ++l) {
        const int v = q[128 * half + 32 * quarter + l];
        ql[64 * half + 32 * (quarter % 2) + l] |=
            static_cast<std::uint8_t>((v & 0xF) << (quarter < 2 ? 0 : 4));
        qh[32 * half + l] |= static_cast<std::uint8_t>((v >> 4) << (2 * quarter));
      }
    }
  }
  std::memcpy(out, ql.data(), ql.size());
  std::memcpy(out + 128, qh.data(), qh.size());
  std::memcpy(out + 192, scales.data(), scales.size());
  store_u16(out + 208, d_bits);
}

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

using BlockFn = void (*)(const float* x, std::byte* out);

BlockFn block_function(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return q4_0_block;
    case GgmlType::kQ4_1:
      return q4_1_block;
    case GgmlType::kQ5_0:
      return q5_0_block;
    case GgmlType::kQ5_1:
      return q5_1_block;
    case GgmlType::kQ8_0:
      return q8_0_block;
    case GgmlType::kQ4_K:
      return q4_k_block;
    case GgmlType::kQ5_K:
      return q5_k_block;
    case GgmlType::kQ6_K:
      return q6_k_block;
    default:
      return nullptr;
  }
}

}  // namespace

bool ggml_quantize_supported(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 ||
         block_function(type) != nullptr;
}

void quantize_ggml(GgmlType type, std::span<const float> src, std::span<std::byte> dst) {
  const std::string_view name = ggml_type_name(type);
  SELFSPEC_CHECK(ggml_quantize_supported(type),
                 "quantize: {} is not a type this quantizer writes (F32, F16, BF16, Q4_0, Q4_1, "
                 "Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)",
                 name);
  const std::int64_t block_elements = ggml_block_elements(type);
  const auto n = static_cast<std::int64_t>(src.size());
  SELFSPEC_CHECK(n % block_elements == 0,
                 "quantize {}: {} elements are not a whole number of blocks of {}", name, n,
                 block_elements);
  const std::uint64_t expected = ggml_row_bytes(type, n);
  SELFSPEC_CHECK(dst.size() == expected,
                 "quantize {}: {} elements take {} bytes, but the destination has {}", name, n,
                 expected, dst.size());
  switch (type) {
    case GgmlType::kF32:
      if (!src.empty()) std::memcpy(dst.data(), src.data(), src.size_bytes());
      return;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (std::size_t i = 0; i < src.size(); ++i) {
        store_u16(dst.data() + 2 * i,
                  type == GgmlType::kF16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]));
      }
      return;
    default:
      break;
  }
  const BlockFn quantize_block = block_function(type);
  const auto block_bytes = static_cast<std::size_t>(ggml_block_bytes(type));
  const auto elements = static_cast<std::size_t>(block_elements);
  for (std::size_t b = 0; b < src.size() / elements; ++b) {
    const float* x = src.data() + b * elements;
    for (std::size_t j = 0; j < elements; ++j) {
      SELFSPEC_CHECK(std::isfinite(x[j]), "quantize {}: element {} is {} (not finite)", name,
                     b * elements + j, x[j]);
    }
    quantize_block(x, dst.data() + b * block_bytes);
  }
}

}  // namespace selfspec
