// ggml tensor types: their names, block geometry, and dequantization to f32 (reference and fast).
//
// The block layouts are those of llama.cpp's ggml-common.h, and every value is computed with the
// float operations of ggml-quants.c's dequantize_row_* in their order (a super-block scale times a
// sub-block scale rounded to f32 first), so results equal ggml's and gguf-py's bit for bit. Most
// products are exact in f32 (an f16 scale's 11 significant bits times small integers; Q2_K's
// (d * sc) * q has at most 11 + 4 + 2 bits, Q3_K's 11 + 6 + 3, Q4_K's and Q5_K's 11 + 6 + 5), so
// only the final add of Q4_1 / Q5_1 / Q2_K / Q4_K / Q5_K and Q6_K's (d * sc) * q (up to 11 + 8 + 6
// bits) round; this file is compiled with -ffp-contract=off (kernels/cpu/CMakeLists.txt) so that no
// build flag fuses operations either.
//
// The reference decodes one element at a time straight from the layout; the fast path works a
// block at a time on local copies of the block's bytes (so the compiler sees no aliasing and
// vectorises the element loops, baseline SSE2). It is single-threaded: callers parallelise over
// rows. Everything assumes a little-endian host, as GGUF files are little-endian.
#include "kernels/cpu/ggml_dequantize.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>

namespace selfspec {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF data is read in place: little-endian");

// ---------------------------------------------------------------------------------------------
// Names and geometry
// ---------------------------------------------------------------------------------------------

struct TypeName {
  std::uint32_t id;
  std::string_view name;
};

// ggml.h's enum ggml_type, including ids since removed from ggml (4, 5, 31-33, 36-38) so old files
// are named in errors.
constexpr TypeName kTypeNames[] = {
    {0, "F32"},     {1, "F16"},         {2, "Q4_0"},        {3, "Q4_1"},        {4, "Q4_2"},
    {5, "Q4_3"},    {6, "Q5_0"},        {7, "Q5_1"},        {8, "Q8_0"},        {9, "Q8_1"},
    {10, "Q2_K"},   {11, "Q3_K"},       {12, "Q4_K"},       {13, "Q5_K"},       {14, "Q6_K"},
    {15, "Q8_K"},   {16, "IQ2_XXS"},    {17, "IQ2_XS"},     {18, "IQ3_XXS"},    {19, "IQ1_S"},
    {20, "IQ4_NL"}, {21, "IQ3_S"},      {22, "IQ2_S"},      {23, "IQ4_XS"},     {24, "I8"},
    {25, "I16"},    {26, "I32"},        {27, "I64"},        {28, "F64"},        {29, "IQ1_M"},
    {30, "BF16"},   {31, "Q4_0_4_4"},   {32, "Q4_0_4_8"},   {33, "Q4_0_8_8"},   {34, "TQ1_0"},
    {35, "TQ2_0"},  {36, "IQ4_NL_4_4"}, {37, "IQ4_NL_4_8"}, {38, "IQ4_NL_8_8"}, {39, "MXFP4"},
    {40, "NVFP4"},  {41, "Q1_0"},
};

// Names of ids ggml does not know are made on demand and kept for the life of the process (the
// interface hands out string_views); a bounded number of them, since ids come from files.
constexpr std::size_t kMaxUnknownNames = 1024;

std::string_view unknown_type_name(std::uint32_t id) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> names;
  std::string name = "type " + std::to_string(id);
  const std::lock_guard lock(mutex);
  if (const auto it = names.find(name); it != names.end()) return *it;
  if (names.size() >= kMaxUnknownNames) return "type (unknown id)";
  return *names.insert(std::move(name)).first;
}

struct BlockGeometry {
  std::int64_t elements;
  std::int64_t bytes;
};

BlockGeometry block_geometry(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return {1, 4};
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return {1, 2};
    case GgmlType::kQ4_0:
      return {32, 2 + 16};
    case GgmlType::kQ4_1:
      return {32, 2 + 2 + 16};
    case GgmlType::kQ5_0:
      return {32, 2 + 4 + 16};
    case GgmlType::kQ5_1:
      return {32, 2 + 2 + 4 + 16};
    case GgmlType::kQ8_0:
      return {32, 2 + 32};
    case GgmlType::kQ2_K:
      return {256, 16 + 64 + 2 + 2};
    case GgmlType::kQ3_K:
      return {256, 32 + 64 + 12 + 2};
    case GgmlType::kQ4_K:
      return {256, 2 + 2 + 12 + 128};
    case GgmlType::kQ5_K:
      return {256, 2 + 2 + 12 + 32 + 128};
    case GgmlType::kQ6_K:
      return {256, 128 + 64 + 16 + 2};
  }
  fail("ggml type {} is not supported", ggml_type_name(static_cast<std::uint32_t>(type)));
}

// Checks the element and byte counts of a dequantization.
void check_sizes(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  const auto n = static_cast<std::int64_t>(dst.size());
  const std::uint64_t expected = ggml_row_bytes(type, n);
  SELFSPEC_CHECK(src.size() == expected,
                 "dequantize {}: {} elements take {} bytes, but {} bytes were given",
                 ggml_type_name(type), n, expected, src.size());
}

// ---------------------------------------------------------------------------------------------
// Layout helpers shared by both paths
// ---------------------------------------------------------------------------------------------

std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::uint8_t load_u8(const std::byte* p) {
  return std::to_integer<std::uint8_t>(*p);
}

// Bit j (0..31) of Q5_0/Q5_1's 32-bit qh field, the fifth bit of element j.
int q5_high_bit(const std::byte* qh, int j) {
  return (load_u8(qh + j / 8) >> (j % 8)) & 1;
}

// The 5-bit value of element j of a Q5_0/Q5_1 block: the low 4 bits as in Q4_0 (byte k's low
// nibble is element k, its high nibble element k + 16), the top bit from qh.
int q5_value(const std::byte* qh, const std::byte* qs, int j) {
  const std::uint8_t byte = load_u8(qs + j % 16);
  return (j < 16 ? byte & 0xF : byte >> 4) | (q5_high_bit(qh, j) << 4);
}

// Q4_K's (and Q5_K's) 6-bit scale and min of sub-block j (0..7), packed in 12 bytes (ggml's
// get_scale_min_k4): bytes 0-3 hold scales 0-3 in their low 6 bits, bytes 4-7 mins 0-3; sub-blocks
// 4-7 take their low 4 bits from bytes 8-11 (scale: low nibble, min: high nibble) and their top 2
// bits from the top 2 bits of bytes 0-3 (scale) and 4-7 (min).
struct ScaleMin {
  std::uint8_t scale;
  std::uint8_t min;
};

ScaleMin q4_k_scale_min(const std::uint8_t* packed, int j) {
  if (j < 4) {
    return {static_cast<std::uint8_t>(packed[j] & 63),
            static_cast<std::uint8_t>(packed[j + 4] & 63)};
  }
  return {static_cast<std::uint8_t>((packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4)),
          static_cast<std::uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4))};
}

// Q3_K's 6-bit scale of sub-block s (0..15), packed in 12 bytes (ggml's kmask shuffle in
// dequantize_row_q3_K): the low 4 bits are the low (s < 8) or high (s >= 8) nibble of byte s % 8,
// the top 2 bits are bits 2 * (s / 4) .. 2 * (s / 4) + 1 of byte 8 + s % 4. The scale is that
// value minus 32.
int q3_k_scale(const std::uint8_t* packed, int s) {
  const int low = s < 8 ? packed[s] & 0xF : packed[s - 8] >> 4;
  const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// ---------------------------------------------------------------------------------------------
// Reference: one element at a time
// ---------------------------------------------------------------------------------------------

// Element j of the block at `block` (j < the block's element count).
float reference_element(GgmlType type, const std::byte* block, int j) {
  switch (type) {
    case GgmlType::kF32: {
      float v;
      std::memcpy(&v, block, sizeof v);
      return v;
    }
    case GgmlType::kF16:
      return f16_to_f32(load_u16(block));
    case GgmlType::kBF16:
      return bf16_to_f32(load_u16(block));
    case GgmlType::kQ4_0: {  // {d f16, qs[16]}: byte k's low nibble is element k, its high k + 16
      const std::uint8_t byte = load_u8(block + 2 + j % 16);
      const int q = (j < 16 ? byte & 0xF : byte >> 4) - 8;
      return static_cast<float>(q) * f16_to_f32(load_u16(block));
    }
    case GgmlType::kQ4_1: {  // {d f16, m f16, qs[16]}: x = q * d + m
      const std::uint8_t byte = load_u8(block + 4 + j % 16);
      const int q = j < 16 ? byte & 0xF : byte >> 4;
      return static_cast<float>(q) * f16_to_f32(load_u16(block)) + f16_to_f32(load_u16(block + 2));
    }
    case GgmlType::kQ5_0:  // {d f16, qh u32, qs[16]}: x = (q - 16) * d
      return static_cast<float>(q5_value(block + 2, block + 6, j) - 16) *
             f16_to_f32(load_u16(block));
    case GgmlType::kQ5_1:  // {d f16, m f16, qh u32, qs[16]}: x = q * d + m
      return static_cast<float>(q5_value(block + 4, block + 8, j)) * f16_to_f32(load_u16(block)) +
             f16_to_f32(load_u16(block + 2));
    case GgmlType::kQ8_0:  // {d f16, qs[32] int8}
      return static_cast<float>(static_cast<std::int8_t>(load_u8(block + 2 + j))) *
             f16_to_f32(load_u16(block));
    case GgmlType::kQ2_K: {  // {scales[16], qs[64], d f16, dmin f16}; 16 sub-blocks of 16
      // Each half (128 elements) has 32 qs bytes; its quarter t (32 elements) takes bits
      // 2t..2t+1 of qs[32 * half + l]. Sub-block j / 16's scale byte holds its 4-bit scale (low
      // nibble) and min (high nibble): x = (d * scale) * q - dmin * min.
      const int half = j / 128;
      const int quarter = (j % 128) / 32;
      const int q = (load_u8(block + 16 + 32 * half + j % 32) >> (2 * quarter)) & 3;
      const std::uint8_t sub = load_u8(block + j / 16);
      const float scale = f16_to_f32(load_u16(block + 80)) * static_cast<float>(sub & 0xF);
      const float min = f16_to_f32(load_u16(block + 82)) * static_cast<float>(sub >> 4);
      return scale * static_cast<float>(q) - min;
    }
    case GgmlType::kQ3_K: {  // {hmask[32], qs[64], scales[12], d f16}; 16 sub-blocks of 16
      // The low 2 bits as in Q2_K; element l of quarter t of half h subtracts 4 unless bit 4h + t
      // (= j / 32) of hmask[l] is set: x = (d * (scale - 32)) * q, q in -4..3.
      const int half = j / 128;
      const int quarter = (j % 128) / 32;
      const int low = (load_u8(block + 32 + 32 * half + j % 32) >> (2 * quarter)) & 3;
      const int high = (load_u8(block + j % 32) >> (j / 32)) & 1;
      const int q = low - (high != 0 ? 0 : 4);
      std::uint8_t packed[12];
      std::memcpy(packed, block + 96, sizeof packed);
      const float scale =
          f16_to_f32(load_u16(block + 108)) * static_cast<float>(q3_k_scale(packed, j / 16));
      return scale * static_cast<float>(q);
    }
    case GgmlType::kQ4_K: {  // {d f16, dmin f16, scales[12], qs[128]}; 8 sub-blocks of 32
      // Sub-block pair p (64 elements) shares bytes 32p..32p+31: low nibbles first, then high.
      const int sub = j / 32;
      const std::uint8_t byte = load_u8(block + 16 + 32 * (j / 64) + j % 32);
      const int q = sub % 2 == 0 ? byte & 0xF : byte >> 4;
      std::uint8_t packed[12];
      std::memcpy(packed, block + 4, sizeof packed);
      const ScaleMin sm = q4_k_scale_min(packed, sub);
      const float scale = f16_to_f32(load_u16(block)) * static_cast<float>(sm.scale);
      const float min = f16_to_f32(load_u16(block + 2)) * static_cast<float>(sm.min);
      return scale * static_cast<float>(q) - min;
    }
    case GgmlType::kQ5_K: {  // {d f16, dmin f16, scales[12], qh[32], qs[128]}; 8 sub-blocks of 32
      // The low 4 bits as in Q4_K; the fifth bit of element l of sub-block s is bit s of qh[l].
      const int sub = j / 32;
      const std::uint8_t byte = load_u8(block + 48 + 32 * (j / 64) + j % 32);
      const int high = (load_u8(block + 16 + j % 32) >> sub) & 1;
      const int q = (sub % 2 == 0 ? byte & 0xF : byte >> 4) | (high << 4);
      std::uint8_t packed[12];
      std::memcpy(packed, block + 4, sizeof packed);
      const ScaleMin sm = q4_k_scale_min(packed, sub);
      const float scale = f16_to_f32(load_u16(block)) * static_cast<float>(sm.scale);
      const float min = f16_to_f32(load_u16(block + 2)) * static_cast<float>(sm.min);
      return scale * static_cast<float>(q) - min;
    }
    case GgmlType::kQ6_K: {  // {ql[128], qh[64], scales[16] int8, d f16}; 16 sub-blocks of 16
      // Each half (128 elements) has 64 ql bytes and 32 qh bytes; its quarter t (32 elements)
      // takes the low (t = 0, 1) or high (t = 2, 3) nibble of ql[32 * (t % 2) + l] and bits
      // 2t..2t+1 of qh[l] as the top two bits.
      const int half = j / 128;
      const int quarter = (j % 128) / 32;
      const int l = j % 32;
      const std::uint8_t low = load_u8(block + 64 * half + 32 * (quarter % 2) + l);
      const std::uint8_t high = load_u8(block + 128 + 32 * half + l);
      const int q =
          ((quarter < 2 ? low & 0xF : low >> 4) | (((high >> (2 * quarter)) & 3) << 4)) - 32;
      const auto sub_scale = static_cast<std::int8_t>(load_u8(block + 192 + j / 16));
      const float scale = f16_to_f32(load_u16(block + 208)) * static_cast<float>(sub_scale);
      return scale * static_cast<float>(q);
    }
  }
  fail("ggml type {} is not supported", ggml_type_name(static_cast<std::uint32_t>(type)));
}

// ---------------------------------------------------------------------------------------------
// Fast path: a block at a time
// ---------------------------------------------------------------------------------------------

// f16 -> f32 without branches (so loops over it vectorise); equal bit for bit to core's
// f16_to_f32 on all 65536 inputs (the unit test checks them all). Exponent and mantissa move to
// their f32 positions and the exponent is rebiased; infinities and NaNs get the full f32
// exponent; subnormals (and zero) are 2^-14 + m * 2^-24 minus 2^-14, which is exact.
inline float f16_bits_to_f32(std::uint16_t h) {
  constexpr std::uint32_t kExponentMask = 0x1Fu << 23;
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  const std::uint32_t shifted = (static_cast<std::uint32_t>(h) & 0x7FFFu) << 13;
  const std::uint32_t exponent = shifted & kExponentMask;
  // All-ones masks instead of branches or ?:, which GCC does not if-convert around the float
  // subtraction.
  const std::uint32_t special = 0u - static_cast<std::uint32_t>(exponent == kExponentMask);
  const std::uint32_t tiny = 0u - static_cast<std::uint32_t>(exponent == 0);
  const std::uint32_t normal = shifted + ((127u - 15u) << 23) + (special & ((128u - 16u) << 23));
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(
      std::bit_cast<float>(shifted + (113u << 23)) - std::bit_cast<float>(113u << 23));
  return std::bit_cast<float>(((normal & ~tiny) | (subnormal & tiny)) | sign);
}

// Elements per chunk of the F16/BF16 loops (their bytes are copied to a local array first).
constexpr std::size_t kChunk = 256;

template <class Convert>
void dequantize_16bit(std::span<const std::byte> src, std::span<float> dst, Convert convert) {
  std::array<std::uint16_t, kChunk> bits;
  for (std::size_t start = 0; start < dst.size(); start += kChunk) {
    const std::size_t n = std::min(kChunk, dst.size() - start);
    std::memcpy(bits.data(), src.data() + 2 * start, 2 * n);
    float* y = dst.data() + start;
    for (std::size_t i = 0; i < n; ++i) y[i] = convert(bits[i]);
  }
}

// The 32 4-bit values of a Q4_0/Q4_1 block: byte k's low nibble is element k, its high nibble
// element k + 16. (Unpacking to bytes first lets both loops vectorise.)
std::array<std::uint8_t, 32> unpack_nibbles(const std::byte* packed) {
  std::array<std::uint8_t, 16> bytes;
  std::memcpy(bytes.data(), packed, bytes.size());
  std::array<std::uint8_t, 32> q;
  for (int k = 0; k < 16; ++k) {
    q[k] = bytes[k] & 0xF;
    q[k + 16] = bytes[k] >> 4;
  }
  return q;
}

void q4_0_block(const std::byte* block, float* y) {
  const float d = f16_bits_to_f32(load_u16(block));
  const std::array<std::uint8_t, 32> q = unpack_nibbles(block + 2);
  for (int k = 0; k < 32; ++k) y[k] = static_cast<float>(q[k] - 8) * d;
}

void q4_1_block(const std::byte* block, float* y) {
  const float d = f16_bits_to_f32(load_u16(block));
  const float m = f16_bits_to_f32(load_u16(block + 2));
  const std::array<std::uint8_t, 32> q = unpack_nibbles(block + 4);
  for (int k = 0; k < 32; ++k) y[k] = static_cast<float>(q[k]) * d + m;
}

// Q5_0/Q5_1: the fifth bit of element k is bit k of the little-endian 32-bit qh. It is tested
// against a table of masks inside the float loop, in the same 32-bit lanes as the conversion:
// shifting by the element index does not vectorise without AVX2's per-lane shifts, and assembling
// the 5-bit bytes first costs repacking (measured with ggml_dequantize_bench, this way is about 3x
// faster than either).
constexpr std::array<std::uint32_t, 32> kQ5HighBit = [] {
  std::array<std::uint32_t, 32> masks{};
  for (int k = 0; k < 32; ++k) masks[k] = 1u << k;
  return masks;
}();

// The 5-bit value of element k: its nibble, plus 16 when its bit of qh is set.
inline int q5_value_fast(std::uint8_t nibble, std::uint32_t qh, int k) {
  return nibble + ((qh & kQ5HighBit[k]) != 0 ? 16 : 0);
}

void q5_0_block(const std::byte* block, float* y) {
  const float d = f16_bits_to_f32(load_u16(block));
  std::uint32_t qh;
  std::memcpy(&qh, block + 2, sizeof qh);
  const std::array<std::uint8_t, 32> q = unpack_nibbles(block + 6);
  for (int k = 0; k < 32; ++k) y[k] = static_cast<float>(q5_value_fast(q[k], qh, k) - 16) * d;
}

void q5_1_block(const std::byte* block, float* y) {
  const float d = f16_bits_to_f32(load_u16(block));
  const float m = f16_bits_to_f32(load_u16(block + 2));
  std::uint32_t qh;
  std::memcpy(&qh, block + 4, sizeof qh);
  const std::array<std::uint8_t, 32> q = unpack_nibbles(block + 8);
  for (int k = 0; k < 32; ++k) y[k] = static_cast<float>(q5_value_fast(q[k], qh, k)) * d + m;
}

void q8_0_block(const std::byte* block, float* y) {
  const float d = f16_bits_to_f32(load_u16(block));
  std::array<std::int8_t, 32> qs;
  std::memcpy(qs.data(), block + 2, qs.size());
  for (int k = 0; k < 32; ++k) y[k] = static_cast<float>(qs[k]) * d;
}

// Q2_K and Q3_K: each half (128 elements) has 32 qs bytes; quarter t of a half takes bits
// 2t..2t+1 of them, 16 elements (one sub-block, one scale) at a time.
void q2_k_block(const std::byte* block, float* y) {
  std::array<std::uint8_t, 16> packed;
  std::memcpy(packed.data(), block, packed.size());
  std::array<std::uint8_t, 64> qs;
  std::memcpy(qs.data(), block + 16, qs.size());
  const float d = f16_bits_to_f32(load_u16(block + 80));
  const float dmin = f16_bits_to_f32(load_u16(block + 82));
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* q = qs.data() + 32 * half;
    for (int quarter = 0; quarter < 4; ++quarter) {
      const int shift = 2 * quarter;
      for (int g = 0; g < 2; ++g) {
        const int sub = 8 * half + 2 * quarter + g;
        const float scale = d * static_cast<float>(packed[sub] & 0xF);
        const float min = dmin * static_cast<float>(packed[sub] >> 4);
        const std::uint8_t* bytes = q + 16 * g;
        float* out = y + 16 * sub;
        for (int l = 0; l < 16; ++l) {
          out[l] = scale * static_cast<float>((bytes[l] >> shift) & 3) - min;
        }
      }
    }
  }
}

void q3_k_block(const std::byte* block, float* y) {
  std::array<std::uint8_t, 32> hmask;
  std::memcpy(hmask.data(), block, hmask.size());
  std::array<std::uint8_t, 64> qs;
  std::memcpy(qs.data(), block + 32, qs.size());
  std::array<std::uint8_t, 12> packed;
  std::memcpy(packed.data(), block + 96, packed.size());
  const float d = f16_bits_to_f32(load_u16(block + 108));
  std::array<float, 16> scales;
  for (int s = 0; s < 16; ++s) scales[s] = d * static_cast<float>(q3_k_scale(packed.data(), s));
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* q = qs.data() + 32 * half;
    for (int quarter = 0; quarter < 4; ++quarter) {
      const int shift = 2 * quarter;
      const int bit = 4 * half + quarter;  // of hmask[l]: set means no -4
      for (int g = 0; g < 2; ++g) {
        const int sub = 8 * half + 2 * quarter + g;
        const float scale = scales[sub];
        float* out = y + 16 * sub;
        for (int l = 0; l < 16; ++l) {
          const int i = 16 * g + l;
          const int v = ((q[i] >> shift) & 3) - 4 + 4 * ((hmask[i] >> bit) & 1);
          out[l] = scale * static_cast<float>(v);
        }
      }
    }
  }
}

void q4_k_block(const std::byte* block, float* y) {
  const float d = f16_bits_to_f32(load_u16(block));
  const float dmin = f16_bits_to_f32(load_u16(block + 2));
  std::array<std::uint8_t, 12> packed;
  std::memcpy(packed.data(), block + 4, packed.size());
  std::array<std::uint8_t, 128> qs;
  std::memcpy(qs.data(), block + 16, qs.size());
  for (int pair = 0; pair < 4; ++pair) {  // 64 elements: low nibbles, then high nibbles
    const ScaleMin lo = q4_k_scale_min(packed.data(), 2 * pair);
    const ScaleMin hi = q4_k_scale_min(packed.data(), 2 * pair + 1);
    const float scale_lo = d * static_cast<float>(lo.scale);
    const float min_lo = dmin * static_cast<float>(lo.min);
    const float scale_hi = d * static_cast<float>(hi.scale);
    const float min_hi = dmin * static_cast<float>(hi.min);
    const std::uint8_t* q = qs.data() + 32 * pair;
    float* out = y + 64 * pair;
    for (int l = 0; l < 32; ++l) out[l] = scale_lo * static_cast<float>(q[l] & 0xF) - min_lo;
    for (int l = 0; l < 32; ++l) out[l + 32] = scale_hi * static_cast<float>(q[l] >> 4) - min_hi;
  }
}

void q5_k_block(const std::byte* block, float* y) {
  const float d = f16_bits_to_f32(load_u16(block));
  const float dmin = f16_bits_to_f32(load_u16(block + 2));
  std::array<std::uint8_t, 12> packed;
  std::memcpy(packed.data(), block + 4, packed.size());
  std::array<std::uint8_t, 32> qh;
  std::memcpy(qh.data(), block + 16, qh.size());
  std::array<std::uint8_t, 128> qs;
  std::memcpy(qs.data(), block + 48, qs.size());
  for (int pair = 0; pair < 4; ++pair) {  // 64 elements: low nibbles, then high nibbles
    const ScaleMin lo = q4_k_scale_min(packed.data(), 2 * pair);
    const ScaleMin hi = q4_k_scale_min(packed.data(), 2 * pair + 1);
    const float scale_lo = d * static_cast<float>(lo.scale);
    const float min_lo = dmin * static_cast<float>(lo.min);
    const float scale_hi = d * static_cast<float>(hi.scale);
    const float min_hi = dmin * static_cast<float>(hi.min);
    const std::uint8_t* q = qs.data() + 32 * pair;
    const int shift_lo = 2 * pair;  // qh bit of sub-block 2 * pair, then of 2 * pair + 1
    const int shift_hi = 2 * pair + 1;
    float* out = y + 64 * pair;
    for (int l = 0; l < 32; ++l) {
      const int v = (q[l] & 0xF) | (((qh[l] >> shift_lo) & 1) << 4);
      out[l] = scale_lo * static_cast<float>(v) - min_lo;
    }
    for (int l = 0; l < 32; ++l) {
      const int v = (q[l] >> 4) | (((qh[l] >> shift_hi) & 1) << 4);
      out[l + 32] = scale_hi * static_cast<float>(v) - min_hi;
    }
  }
}

void q6_k_block(const std::byte* block, float* y) {
  std::array<std::uint8_t, 128> ql;
  std::memcpy(ql.data(), block, ql.size());
  std::array<std::uint8_t, 64> qh;
  std::memcpy(qh.data(), block + 128, qh.size());
  std::array<std::int8_t, 16> sub_scales;
  std::memcpy(sub_scales.data(), block + 192, sub_scales.size());
  const float d = f16_bits_to_f32(load_u16(block + 208));
  std::array<float, 16> scales;
  for (int s = 0; s < 16; ++s) scales[s] = d * static_cast<float>(sub_scales[s]);
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* low = ql.data() + 64 * half;
    const std::uint8_t* high = qh.data() + 32 * half;
    for (int quarter = 0; quarter < 4; ++quarter) {
      const std::uint8_t* nibbles = low + 32 * (quarter % 2);
      const int nibble_shift = quarter < 2 ? 0 : 4;
      const int high_shift = 2 * quarter;
      for (int g = 0; g < 2; ++g) {  // two sub-blocks of 16, one scale each
        const int first = 32 * quarter + 16 * g;
        const float scale = scales[8 * half + first / 16];
        float* out = y + 128 * half + first;
        for (int l = 0; l < 16; ++l) {
          const int i = 16 * g + l;
          const int q =
              (((nibbles[i] >> nibble_shift) & 0xF) | (((high[i] >> high_shift) & 3) << 4)) - 32;
          out[l] = scale * static_cast<float>(q);
        }
      }
    }
  }
}

// The block function is a template argument so that each type gets its own loop with the block
// inlined.
using BlockFn = void (*)(const std::byte* block, float* y);

template <BlockFn kBlock>
void dequantize_blocks(std::span<const std::byte> src, std::span<float> dst, BlockGeometry g) {
  const auto n_blocks = static_cast<std::int64_t>(dst.size()) / g.elements;
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    kBlock(src.data() + b * g.bytes, dst.data() + b * g.elements);
  }
}

}  // namespace

std::optional<GgmlType> ggml_type_from_id(std::uint32_t id) {
  for (const GgmlType type : kSupportedGgmlTypes) {
    if (static_cast<std::uint32_t>(type) == id) return type;
  }
  return std::nullopt;
}

std::string_view ggml_type_name(std::uint32_t id) {
  for (const TypeName& entry : kTypeNames) {
    if (entry.id == id) return entry.name;
  }
  return unknown_type_name(id);
}

std::int64_t ggml_block_elements(GgmlType type) {
  return block_geometry(type).elements;
}

std::int64_t ggml_block_bytes(GgmlType type) {
  return block_geometry(type).bytes;
}

std::uint64_t ggml_row_bytes(GgmlType type, std::int64_t n) {
  const BlockGeometry block = block_geometry(type);
  SELFSPEC_CHECK(n >= 0 && n % block.elements == 0,
                 "{}: {} elements are not a whole number of blocks of {}", ggml_type_name(type), n,
                 block.elements);
  const auto blocks = static_cast<std::uint64_t>(n / block.elements);
  const auto bytes = static_cast<std::uint64_t>(block.bytes);
  SELFSPEC_CHECK(blocks <= std::numeric_limits<std::uint64_t>::max() / bytes,
                 "{}: {} elements overflow a 64-bit byte count", ggml_type_name(type), n);
  return blocks * bytes;
}

void dequantize_ggml_reference(GgmlType type, std::span<const std::byte> src,
                               std::span<float> dst) {
  check_sizes(type, src, dst);
  const BlockGeometry block = block_geometry(type);
  const auto n_blocks = static_cast<std::int64_t>(dst.size()) / block.elements;
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    for (std::int64_t j = 0; j < block.elements; ++j) {
      dst[static_cast<std::size_t>(b * block.elements + j)] =
          reference_element(type, src.data() + b * block.bytes, static_cast<int>(j));
    }
  }
}

void dequantize_ggml(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  check_sizes(type, src, dst);
  const BlockGeometry g = block_geometry(type);
  switch (type) {
    case GgmlType::kF32:
      if (!dst.empty()) std::memcpy(dst.data(), src.data(), src.size());
      return;
    case GgmlType::kF16:
      return dequantize_16bit(src, dst, [](std::uint16_t h) { return f16_bits_to_f32(h); });
    case GgmlType::kBF16:
      return dequantize_16bit(src, dst, [](std::uint16_t h) { return bf16_to_f32(h); });
    case GgmlType::kQ4_0:
      return dequantize_blocks<q4_0_block>(src, dst, g);
    case GgmlType::kQ4_1:
      return dequantize_blocks<q4_1_block>(src, dst, g);
    case GgmlType::kQ5_0:
      return dequantize_blocks<q5_0_block>(src, dst, g);
    case GgmlType::kQ5_1:
      return dequantize_blocks<q5_1_block>(src, dst, g);
    case GgmlType::kQ8_0:
      return dequantize_blocks<q8_0_block>(src, dst, g);
    case GgmlType::kQ2_K:
      return dequantize_blocks<q2_k_block>(src, dst, g);
    case GgmlType::kQ3_K:
      return dequantize_blocks<q3_k_block>(src, dst, g);
    case GgmlType::kQ4_K:
      return dequantize_blocks<q4_k_block>(src, dst, g);
    case GgmlType::kQ5_K:
      return dequantize_blocks<q5_k_block>(src, dst, g);
    case GgmlType::kQ6_K:
      return dequantize_blocks<q6_k_block>(src, dst, g);
  }
}

}  // namespace selfspec
