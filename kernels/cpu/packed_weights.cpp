// Packing GGUF blocks and bf16 rows into row panels, and back (packed_weights.hpp).
//
// Quantized blocks go through one small decoded form, BlockValues: a block's groups of 32 as
// unsigned integers u and their scales, exactly as the file holds them (f16 bits, 6-bit scales as
// bytes). decode_block reads the ggml layouts (llama.cpp's ggml-common.h; the same element order
// as ggml_dequantize.cpp's reference) and encode_block writes them back, so unpacking a panel
// gives the file's bytes again; padding groups (a super-block cut by a column slice) are zeros.
#include "kernels/cpu/packed_weights.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>

namespace selfspec::kernels::cpu {
namespace {

constexpr std::uint32_t kMagic = 0x4B504C53;  // "SLPK"

struct PackedHeader {
  std::uint32_t magic;
  std::uint32_t format;
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t panel_bytes;
  std::int64_t lead_groups;
  std::int64_t reserved[3];
};
static_assert(sizeof(PackedHeader) == kPackedHeaderBytes);

std::int64_t panel_count(std::int64_t rows) {
  return (rows + kPanelRows - 1) / kPanelRows;
}

// ---- Decoded blocks ------------------------------------------------------------------------

struct GroupValues {
  std::array<std::uint8_t, 32> u{};
  std::uint16_t d = 0;  // f16 bits (32-blocks: the block's scale)
  std::uint16_t m = 0;  // f16 bits (Q4_1/Q5_1: the block's min)
  std::uint8_t sc = 0;  // Q4_K/Q5_K: 6-bit scale and min
  std::uint8_t mn = 0;
  std::array<std::int8_t, 2> sc16{};  // Q6_K: scales of columns 0-15 and 16-31
};

struct BlockValues {
  std::array<GroupValues, kSegmentGroups> groups{};
  std::uint16_t d = 0;  // K formats: super-block scale (and min scale) as f16 bits
  std::uint16_t dmin = 0;
};

std::uint16_t read_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void write_u16(std::byte* p, std::uint16_t v) {
  std::memcpy(p, &v, sizeof v);
}

std::uint8_t byte_at(const std::byte* p, std::int64_t i) {
  return std::to_integer<std::uint8_t>(p[i]);
}

// Q4_K/Q5_K's 12 bytes of 6-bit scales and mins (ggml's get_scale_min_k4, and its inverse).
void decode_scale_min(const std::byte* packed, BlockValues& b) {
  for (int j = 0; j < 8; ++j) {
    GroupValues& g = b.groups[static_cast<std::size_t>(j)];
    if (j < 4) {
      g.sc = byte_at(packed, j) & 63;
      g.mn = byte_at(packed, j + 4) & 63;
    } else {
      g.sc = static_cast<std::uint8_t>((byte_at(packed, j + 4) & 0xF) |
                                       ((byte_at(packed, j - 4) >> 6) << 4));
      g.mn = static_cast<std::uint8_t>((byte_at(packed, j + 4) >> 4) |
                                       ((byte_at(packed, j) >> 6) << 4));
    }
  }
}

void encode_scale_min(const BlockValues& b, std::byte* packed) {
  std::array<std::uint8_t, 12> out{};
  for (int j = 0; j < 8; ++j) {
    const GroupValues& g = b.groups[static_cast<std::size_t>(j)];
    if (j < 4) {
      out[static_cast<std::size_t>(j)] |= g.sc & 63;
      out[static_cast<std::size_t>(j + 4)] |= g.mn & 63;
    } else {
      out[static_cast<std::size_t>(j + 4)] =
          static_cast<std::uint8_t>((g.sc & 0xF) | ((g.mn & 0xF) << 4));
      out[static_cast<std::size_t>(j - 4)] |= static_cast<std::uint8_t>((g.sc >> 4) << 6);
      out[static_cast<std::size_t>(j)] |= static_cast<std::uint8_t>((g.mn >> 4) << 6);
    }
  }
  std::memcpy(packed, out.data(), out.size());
}

// Q4_0/Q4_1/Q5_*: byte k's low nibble is element k, its high nibble element k + 16.
void decode_nibbles(const std::byte* qs, GroupValues& g) {
  for (int k = 0; k < 16; ++k) {
    g.u[static_cast<std::size_t>(k)] = byte_at(qs, k) & 0xF;
    g.u[static_cast<std::size_t>(k + 16)] = byte_at(qs, k) >> 4;
  }
}

void encode_nibbles(const GroupValues& g, std::byte* qs) {
  for (int k = 0; k < 16; ++k) {
    qs[k] = static_cast<std::byte>((g.u[static_cast<std::size_t>(k)] & 0xF) |
                                   ((g.u[static_cast<std::size_t>(k + 16)] & 0xF) << 4));
  }
}

// Q5_0/Q5_1: bit j of the little-endian 32-bit qh is bit 4 of element j.
void decode_high_bits(const std::byte* qh, GroupValues& g) {
  std::uint32_t bits;
  std::memcpy(&bits, qh, sizeof bits);
  for (int j = 0; j < 32; ++j) {
    g.u[static_cast<std::size_t>(j)] |= static_cast<std::uint8_t>(((bits >> j) & 1) << 4);
  }
}

void encode_high_bits(const GroupValues& g, std::byte* qh) {
  std::uint32_t bits = 0;
  for (int j = 0; j < 32; ++j) {
    bits |= static_cast<std::uint32_t>((g.u[static_cast<std::size_t>(j)] >> 4) & 1) << j;
  }
  std::memcpy(qh, &bits, sizeof bits);
}

void decode_q4_k_quants(const std::byte* qs, BlockValues& b) {
  for (int s = 0; s < 8; ++s) {
    const std::byte* pair = qs + 32 * (s / 2);
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t byte = byte_at(pair, l);
      b.groups[static_cast<std::size_t>(s)].u[static_cast<std::size_t>(l)] =
          s % 2 == 0 ? byte & 0xF : byte >> 4;
    }
  }
}

void encode_q4_k_quants(const BlockValues& b, std::byte* qs) {
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      const auto lo = b.groups[static_cast<std::size_t>(2 * p)].u[static_cast<std::size_t>(l)];
      const auto hi = b.groups[static_cast<std::size_t>(2 * p + 1)].u[static_cast<std::size_t>(l)];
      qs[32 * p + l] = static_cast<std::byte>((lo & 0xF) | ((hi & 0xF) << 4));
    }
  }
}

// Q6_K element j: half = j / 128, quarter t = (j % 128) / 32, l = j % 32; low 4 bits from the low
// (t < 2) or high nibble of ql[64 half + 32 (t % 2) + l], bits 4-5 from bits 2t..2t+1 of
// qh[32 half + l]. Group g = 4 half + t.
void decode_q6_k(const std::byte* block, BlockValues& b) {
  for (int g = 0; g < 8; ++g) {
    const int half = g / 4;
    const int t = g % 4;
    GroupValues& out = b.groups[static_cast<std::size_t>(g)];
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t low = byte_at(block, 64 * half + 32 * (t % 2) + l);
      const std::uint8_t high = byte_at(block, 128 + 32 * half + l);
      out.u[static_cast<std::size_t>(l)] = static_cast<std::uint8_t>(
          (t < 2 ? low & 0xF : low >> 4) | (((high >> (2 * t)) & 3) << 4));
    }
    out.sc16[0] = static_cast<std::int8_t>(byte_at(block, 192 + 2 * g));
    out.sc16[1] = static_cast<std::int8_t>(byte_at(block, 192 + 2 * g + 1));
  }
  b.d = read_u16(block + 208);
}

void encode_q6_k(const BlockValues& b, std::byte* block) {
  std::array<std::uint8_t, 210> out{};
  for (int g = 0; g < 8; ++g) {
    const int half = g / 4;
    const int t = g % 4;
    const GroupValues& in = b.groups[static_cast<std::size_t>(g)];
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t u = in.u[static_cast<std::size_t>(l)];
      out[static_cast<std::size_t>(64 * half + 32 * (t % 2) + l)] |=
          static_cast<std::uint8_t>(t < 2 ? (u & 0xF) : (u & 0xF) << 4);
      out[static_cast<std::size_t>(128 + 32 * half + l)] |=
          static_cast<std::uint8_t>(((u >> 4) & 3) << (2 * t));
    }
    out[static_cast<std::size_t>(192 + 2 * g)] = static_cast<std::uint8_t>(in.sc16[0]);
    out[static_cast<std::size_t>(192 + 2 * g + 1)] = static_cast<std::uint8_t>(in.sc16[1]);
  }
  std::memcpy(block, out.data(), out.size());
  write_u16(block + 208, b.d);
}

void decode_block(WeightFormat format, const std::byte* block, BlockValues& b) {
  GroupValues& g = b.groups[0];
  switch (format) {
    case WeightFormat::kQ4_0:
      g.d = read_u16(block);
      decode_nibbles(block + 2, g);
      return;
    case WeightFormat::kQ4_1:
      g.d = read_u16(block);
      g.m = read_u16(block + 2);
      decode_nibbles(block + 4, g);
      return;
    case WeightFormat::kQ5_0:
      g.d = read_u16(block);
      decode_nibbles(block + 6, g);
      decode_high_bits(block + 2, g);
      return;
    case WeightFormat::kQ5_1:
      g.d = read_u16(block);
      g.m = read_u16(block + 2);
      decode_nibbles(block + 8, g);
      decode_high_bits(block + 4, g);
      return;
    case WeightFormat::kQ8_0:
      g.d = read_u16(block);
      for (int j = 0; j < 32; ++j) {
        g.u[static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(byte_at(block, 2 + j) ^ 0x80);
      }
      return;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K: {
      b.d = read_u16(block);
      b.dmin = read_u16(block + 2);
      decode_scale_min(block + 4, b);
      const bool five = format == WeightFormat::kQ5_K;
      decode_q4_k_quants(block + (five ? 48 : 16), b);
      if (five) {
        for (int s = 0; s < 8; ++s) {
          for (int l = 0; l < 32; ++l) {
            b.groups[static_cast<std::size_t>(s)].u[static_cast<std::size_t>(l)] |=
                static_cast<std::uint8_t>(((byte_at(block, 16 + l) >> s) & 1) << 4);
          }
        }
      }
      return;
    }
    case WeightFormat::kQ6_K:
      decode_q6_k(block, b);
      return;
    default:
      fail("decode_block: {} is not quantized", weight_format_name(format));
  }
}

void encode_block(WeightFormat format, const BlockValues& b, std::byte* block) {
  const GroupValues& g = b.groups[0];
  switch (format) {
    case WeightFormat::kQ4_0:
      write_u16(block, g.d);
      encode_nibbles(g, block + 2);
      return;
    case WeightFormat::kQ4_1:
      write_u16(block, g.d);
      write_u16(block + 2, g.m);
      encode_nibbles(g, block + 4);
      return;
    case WeightFormat::kQ5_0:
      write_u16(block, g.d);
      encode_high_bits(g, block + 2);
      encode_nibbles(g, block + 6);
      return;
    case WeightFormat::kQ5_1:
      write_u16(block, g.d);
      write_u16(block + 2, g.m);
      encode_high_bits(g, block + 4);
      encode_nibbles(g, block + 8);
      return;
    case WeightFormat::kQ8_0:
      write_u16(block, g.d);
      for (int j = 0; j < 32; ++j) {
        block[2 + j] = static_cast<std::byte>(g.u[static_cast<std::size_t>(j)] ^ 0x80);
      }
      return;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K: {
      write_u16(block, b.d);
      write_u16(block + 2, b.dmin);
      encode_scale_min(b, block + 4);
      const bool five = format == WeightFormat::kQ5_K;
      encode_q4_k_quants(b, block + (five ? 48 : 16));
      if (five) {
        for (int l = 0; l < 32; ++l) {
          std::uint8_t bits = 0;
          for (int s = 0; s < 8; ++s) {
            bits |= static_cast<std::uint8_t>(
                ((b.groups[static_cast<std::size_t>(s)].u[static_cast<std::size_t>(l)] >> 4) & 1)
                << s);
          }
          block[16 + l] = static_cast<std::byte>(bits);
        }
      }
      return;
    }
    case WeightFormat::kQ6_K:
      encode_q6_k(b, block);
      return;
    default:
      fail("encode_block: {} is not quantized", weight_format_name(format));
  }
}

// ---- Panel positions -----------------------------------------------------------------------

bool finite_f16(std::uint16_t bits) {
  return (bits & 0x7C00) != 0x7C00;
}

// Where a group's bytes sit in a panel: its parameters and quants, and its segment's parameters.
struct GroupPlace {
  std::int64_t segment_params;  // offset in the panel of the segment's parameters
  std::int64_t group_params;    // offset of the group's parameters
  std::int64_t quants;          // offset of the group's quants
};

std::vector<GroupPlace> group_places(const QuantLayout& layout, std::int64_t groups,
                                     std::int64_t lead_groups) {
  std::vector<GroupPlace> places;
  places.reserve(static_cast<std::size_t>(groups));
  std::int64_t offset = 0;
  std::int64_t g = 0;
  while (g < groups) {
    const std::int64_t n = std::min(groups - g, places.empty() ? lead_groups : kSegmentGroups);
    const std::int64_t segment = offset;
    offset += layout.segment_params;
    for (std::int64_t i = 0; i < n; ++i, ++g) {
      places.push_back({segment, offset, offset + layout.group_params});
      offset += layout.group_bytes();
    }
  }
  return places;
}

std::int64_t quant_panel_bytes(const QuantLayout& layout, std::int64_t groups,
                               std::int64_t lead_groups) {
  const std::int64_t rest = std::max<std::int64_t>(0, groups - lead_groups);
  const std::int64_t segments = (groups > 0 ? 1 : 0) + (rest + kSegmentGroups - 1) / kSegmentGroups;
  return segments * layout.segment_params + groups * layout.group_bytes();
}

std::int64_t lead_groups_for(const QuantLayout& layout, std::int64_t skip) {
  return layout.k_quant ? kSegmentGroups - skip / kGroupCols : kSegmentGroups;
}

void write_header(std::span<std::byte> out, WeightFormat format, std::int64_t rows,
                  std::int64_t cols, std::int64_t panel_bytes, std::int64_t lead_groups) {
  PackedHeader header{};
  header.magic = kMagic;
  header.format = static_cast<std::uint32_t>(format);
  header.rows = rows;
  header.cols = cols;
  header.panel_bytes = panel_bytes;
  header.lead_groups = lead_groups;
  std::memcpy(out.data(), &header, sizeof header);
}

// Writes one row's group into its panel (lane r): parameters and quants.
void place_group(const QuantLayout& layout, WeightFormat format, const GroupValues& g,
                 const BlockValues& block, std::int64_t r, const GroupPlace& place,
                 std::byte* panel) {
  const auto lane = static_cast<std::size_t>(r);
  auto* seg = reinterpret_cast<std::uint16_t*>(panel + place.segment_params);
  std::byte* params = panel + place.group_params;
  std::byte* quants = panel + place.quants;
  switch (format) {
    case WeightFormat::kQ4_0:
    case WeightFormat::kQ5_0:
    case WeightFormat::kQ8_0:
      write_u16(params + 2 * lane, g.d);
      break;
    case WeightFormat::kQ4_1:
    case WeightFormat::kQ5_1:
      write_u16(params + 2 * lane, g.d);
      write_u16(params + 32 + 2 * lane, g.m);
      break;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K:
      write_u16(reinterpret_cast<std::byte*>(seg) + 2 * lane, block.d);
      write_u16(reinterpret_cast<std::byte*>(seg) + 32 + 2 * lane, block.dmin);
      params[lane] = static_cast<std::byte>(g.sc);
      params[16 + lane] = static_cast<std::byte>(g.mn);
      break;
    case WeightFormat::kQ6_K:
      write_u16(reinterpret_cast<std::byte*>(seg) + 2 * lane, block.d);
      params[lane] = static_cast<std::byte>(g.sc16[0]);
      params[16 + lane] = static_cast<std::byte>(g.sc16[1]);
      break;
    default:  // an unknown format is an error, never a group left unwritten
      fail("packed group: format {} is not quantized", weight_format_name(format));
  }
  for (int col = 0; col < 32; ++col) {
    const std::uint8_t u = g.u[static_cast<std::size_t>(col)];
    const int k = col / 4;
    const std::int64_t byte = 4 * r + col % 4;
    if (layout.bits == 8) {
      quants[64 * k + byte] = static_cast<std::byte>(u);
      continue;
    }
    const std::int64_t nibble_block = 64 * (k % 4) + byte;
    quants[nibble_block] |= static_cast<std::byte>((u & 0xF) << (k < 4 ? 0 : 4));
    if (layout.bits == 5) {
      quants[256 + 8 * k + byte / 8] |= static_cast<std::byte>(((u >> 4) & 1) << (byte % 8));
    } else if (layout.bits == 6) {
      quants[256 + 64 * (k / 4) + byte] |= static_cast<std::byte>(((u >> 4) & 3) << (2 * (k % 4)));
    }
  }
}

// Reads lane r's group back from its panel (the inverse of place_group).
void read_group(const QuantLayout& layout, WeightFormat format, std::int64_t r,
                const GroupPlace& place, const std::byte* panel, GroupValues& g,
                BlockValues& block) {
  const auto lane = static_cast<std::size_t>(r);
  const std::byte* seg = panel + place.segment_params;
  const std::byte* params = panel + place.group_params;
  const std::byte* quants = panel + place.quants;
  switch (format) {
    case WeightFormat::kQ4_0:
    case WeightFormat::kQ5_0:
    case WeightFormat::kQ8_0:
      g.d = read_u16(params + 2 * lane);
      break;
    case WeightFormat::kQ4_1:
    case WeightFormat::kQ5_1:
      g.d = read_u16(params + 2 * lane);
      g.m = read_u16(params + 32 + 2 * lane);
      break;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K:
      block.d = read_u16(seg + 2 * lane);
      block.dmin = read_u16(seg + 32 + 2 * lane);
      g.sc = byte_at(params, r);
      g.mn = byte_at(params, 16 + r);
      break;
    case WeightFormat::kQ6_K:
      block.d = read_u16(seg + 2 * lane);
      g.sc16[0] = static_cast<std::int8_t>(byte_at(params, r));
      g.sc16[1] = static_cast<std::int8_t>(byte_at(params, 16 + r));
      break;
    default:  // an unknown format is an error, never a group left unwritten
      fail("packed group: format {} is not quantized", weight_format_name(format));
  }
  for (int col = 0; col < 32; ++col) {
    const int k = col / 4;
    const std::int64_t byte = 4 * r + col % 4;
    std::uint8_t u = 0;
    if (layout.bits == 8) {
      u = byte_at(quants, 64 * k + byte);
    } else {
      u = (byte_at(quants, 64 * (k % 4) + byte) >> (k < 4 ? 0 : 4)) & 0xF;
      if (layout.bits == 5) {
        u |= static_cast<std::uint8_t>(((byte_at(quants, 256 + 8 * k + byte / 8) >> (byte % 8)) & 1)
                                       << 4);
      } else if (layout.bits == 6) {
        u |= static_cast<std::uint8_t>(
            ((byte_at(quants, 256 + 64 * (k / 4) + byte) >> (2 * (k % 4))) & 3) << 4);
      }
    }
    g.u[static_cast<std::size_t>(col)] = u;
  }
}

// Whether the scales of a group and its block are finite (f16 scales of 32-blocks, K
// super-blocks'); a file with an infinite or NaN scale is malformed.
bool finite_scales(const QuantLayout& layout, const GroupValues& g, const BlockValues& block) {
  return layout.k_quant ? finite_f16(block.d) && finite_f16(block.dmin)
                        : finite_f16(g.d) && finite_f16(g.m);
}

// The groups of one row of a GGUF slice in slice order, each block decoded once, when its first
// group is asked for (groups are asked for in ascending order).
class SliceRowBlocks {
 public:
  SliceRowBlocks(WeightFormat format, const std::byte* row, std::int64_t skip)
      : format_(format),
        row_(row),
        block_bytes_(ggml_block_bytes(ggml_type_of(format))),
        groups_per_block_(ggml_block_elements(ggml_type_of(format)) / kGroupCols),
        first_group_(skip / kGroupCols) {}

  // Group g of the slice (its block is block() afterwards).
  const GroupValues& group(std::int64_t g) {
    const std::int64_t source_group = first_group_ + g;
    const std::int64_t b = source_group / groups_per_block_;
    if (b != decoded_) {
      block_ = BlockValues{};
      decode_block(format_, row_ + b * block_bytes_, block_);
      decoded_ = b;
    }
    return block_.groups[static_cast<std::size_t>(source_group % groups_per_block_)];
  }
  const BlockValues& block() const { return block_; }
  // The slice's block the last group came from (0: the one holding its first group).
  std::int64_t block_index() const { return decoded_ - first_group_ / groups_per_block_; }

 private:
  WeightFormat format_;
  const std::byte* row_;
  std::int64_t block_bytes_;
  std::int64_t groups_per_block_;
  std::int64_t first_group_;
  BlockValues block_;
  std::int64_t decoded_ = -1;
};

QuantGroupValues quant_group_values(const GroupValues& g) {
  QuantGroupValues out;
  out.u = g.u;
  out.d = g.d;
  out.m = g.m;
  out.sc = g.sc;
  out.mn = g.mn;
  out.sc16 = g.sc16;
  return out;
}

}  // namespace

GgmlType ggml_type_of(WeightFormat format) {
  switch (format) {
    case WeightFormat::kQ4_0:
      return GgmlType::kQ4_0;
    case WeightFormat::kQ4_1:
      return GgmlType::kQ4_1;
    case WeightFormat::kQ5_0:
      return GgmlType::kQ5_0;
    case WeightFormat::kQ5_1:
      return GgmlType::kQ5_1;
    case WeightFormat::kQ8_0:
      return GgmlType::kQ8_0;
    case WeightFormat::kQ4_K:
      return GgmlType::kQ4_K;
    case WeightFormat::kQ5_K:
      return GgmlType::kQ5_K;
    case WeightFormat::kQ6_K:
      return GgmlType::kQ6_K;
    default:
      fail("weight format {} is not a quantized format", weight_format_name(format));
  }
}

// ---- Geometry -------------------------------------------------------------------------------

QuantLayout quant_layout(WeightFormat format) {
  switch (format) {
    case WeightFormat::kQ4_0:
      return {4, 8, false, 0, 32, 256};
    case WeightFormat::kQ4_1:
      return {4, 0, false, 0, 64, 256};
    case WeightFormat::kQ5_0:
      return {5, 16, false, 0, 32, 256 + 64};
    case WeightFormat::kQ5_1:
      return {5, 0, false, 0, 64, 256 + 64};
    case WeightFormat::kQ8_0:
      return {8, 128, false, 0, 32, 512};
    case WeightFormat::kQ4_K:
      return {4, 0, true, 64, 32, 256};
    case WeightFormat::kQ5_K:
      return {5, 0, true, 64, 32, 256 + 64};
    case WeightFormat::kQ6_K:
      return {6, 32, true, 32, 32, 256 + 128};
    default:
      fail("weight format {} is not quantized", weight_format_name(format));
  }
}

PanelGeometry panel_geometry(const PackedView& view) {
  SELFSPEC_CHECK(view.data != nullptr, "packed {} matrix: null data",
                 weight_format_name(view.format));
  PackedHeader header;
  std::memcpy(&header, view.data, sizeof header);
  SELFSPEC_CHECK(header.magic == kMagic, "packed {} matrix [{} x {}]: bad header (not packed)",
                 weight_format_name(view.format), view.rows, view.cols);
  SELFSPEC_CHECK(header.format == static_cast<std::uint32_t>(view.format) &&
                     header.rows == view.rows && header.cols == view.cols,
                 "packed matrix: the view says {} [{} x {}], its header {} [{} x {}]",
                 weight_format_name(view.format), view.rows, view.cols,
                 weight_format_name(static_cast<WeightFormat>(header.format)), header.rows,
                 header.cols);
  PanelGeometry g;
  g.format = view.format;
  g.rows = view.rows;
  g.cols = view.cols;
  g.panels = panel_count(view.rows);
  g.panel_bytes = header.panel_bytes;
  g.lead_groups = header.lead_groups;
  g.first_panel = static_cast<const std::byte*>(view.data) + kPackedHeaderBytes;
  return g;
}

std::int64_t panels_per_chunk(const PanelGeometry& g) {
  const std::int64_t threads = std::max(1, num_threads());
  const std::int64_t even = (g.panels + threads - 1) / threads;
  const std::int64_t minimum = std::max<std::int64_t>(1, (std::int64_t{64} << 10) / g.panel_bytes);
  return std::max(even, minimum);
}

std::int64_t packed_bytes(const PackedView& view) {
  const PanelGeometry g = panel_geometry(view);
  return kPackedHeaderBytes + g.panels * g.panel_bytes;
}

// ---- Quantized ------------------------------------------------------------------------------

std::int64_t packed_quant_bytes(WeightFormat format, std::int64_t rows, std::int64_t cols,
                                std::int64_t skip) {
  const QuantLayout layout = quant_layout(format);
  return kPackedHeaderBytes + panel_count(rows) * quant_panel_bytes(layout, cols / kGroupCols,
                                                                    lead_groups_for(layout, skip));
}

namespace {

// Throws (naming `what`) unless the slice is whole 32-column groups starting inside its first
// block, with rows long enough for the blocks covering skip + cols columns.
void check_slice(const GgufRows& in, const char* what) {
  const GgmlType type = ggml_type_of(in.format);
  const std::int64_t block_elems = ggml_block_elements(type);
  SELFSPEC_CHECK(in.rows > 0 && in.cols > 0 && in.cols % kGroupCols == 0 && in.skip >= 0 &&
                     in.skip % kGroupCols == 0 && in.skip < block_elems && in.data != nullptr,
                 "{} {}: bad slice (rows {}, cols {}, skip {})", what,
                 weight_format_name(in.format), in.rows, in.cols, in.skip);
  const std::int64_t blocks = (in.skip + in.cols + block_elems - 1) / block_elems;
  SELFSPEC_CHECK(in.row_stride >= blocks * ggml_block_bytes(type),
                 "{} {}: rows of {} bytes cannot hold {} blocks", what,
                 weight_format_name(in.format), in.row_stride, blocks);
}

}  // namespace

void pack_quant_rows(const GgufRows& in, std::span<std::byte> out) {
  const QuantLayout layout = quant_layout(in.format);
  check_slice(in, "pack");
  const std::int64_t groups = in.cols / kGroupCols;
  const std::int64_t lead = lead_groups_for(layout, in.skip);
  const std::int64_t panel_bytes = quant_panel_bytes(layout, groups, lead);
  const std::int64_t panels = panel_count(in.rows);
  SELFSPEC_CHECK(static_cast<std::int64_t>(out.size()) == kPackedHeaderBytes + panels * panel_bytes,
                 "pack {}: output of {} bytes, expected {}", weight_format_name(in.format),
                 out.size(), kPackedHeaderBytes + panels * panel_bytes);
  std::memset(out.data(), 0, out.size());
  write_header(out, in.format, in.rows, in.cols, panel_bytes, lead);
  const std::vector<GroupPlace> places = group_places(layout, groups, lead);
  std::byte* first_panel = out.data() + kPackedHeaderBytes;
  // The first malformed block (smallest row, then column), reported after the parallel loop: an
  // exception may not leave it.
  std::atomic<std::int64_t> bad_row{in.rows};
  std::atomic<std::int64_t> bad_col{0};
  parallel_for(panels, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      std::byte* panel = first_panel + p * panel_bytes;
      for (std::int64_t r = 0; r < kPanelRows && p * kPanelRows + r < in.rows; ++r) {
        const std::int64_t row = p * kPanelRows + r;
        SliceRowBlocks blocks(in.format, in.data + row * in.row_stride, in.skip);
        for (std::int64_t g = 0; g < groups; ++g) {
          const GroupValues& values = blocks.group(g);
          const BlockValues& block = blocks.block();
          if (!finite_scales(layout, values, block)) {
#pragma omp critical(pack_quant_error)
            if (row < bad_row.load()) {
              bad_row.store(row);
              bad_col.store(g * kGroupCols);
            }
          }
          place_group(layout, in.format, values, block, r, places[static_cast<std::size_t>(g)],
                      panel);
        }
      }
    }
  });
  SELFSPEC_CHECK(bad_row.load() == in.rows,
                 "{} block at row {}, column {} of the slice has a non-finite f16 scale (a "
                 "malformed file)",
                 weight_format_name(in.format), bad_row.load(), bad_col.load());
}

std::int64_t unpacked_row_bytes(const PackedView& view) {
  const PanelGeometry g = panel_geometry(view);
  const QuantLayout layout = quant_layout(view.format);
  const GgmlType type = ggml_type_of(view.format);
  const std::int64_t lead_skip = layout.k_quant ? (kSegmentGroups - g.lead_groups) * kGroupCols : 0;
  const std::int64_t block_elems = ggml_block_elements(type);
  return (lead_skip + view.cols + block_elems - 1) / block_elems * ggml_block_bytes(type);
}

std::int64_t unpack_quant_row(const PackedView& view, std::int64_t row, std::span<std::byte> out) {
  const PanelGeometry geometry = panel_geometry(view);
  const QuantLayout layout = quant_layout(view.format);
  const GgmlType type = ggml_type_of(view.format);
  SELFSPEC_CHECK(row >= 0 && row < view.rows, "unpack: row {} outside [0, {})", row, view.rows);
  SELFSPEC_CHECK(static_cast<std::int64_t>(out.size()) == unpacked_row_bytes(view),
                 "unpack: output of {} bytes, expected {}", out.size(), unpacked_row_bytes(view));
  const std::int64_t lead_skip =
      layout.k_quant ? (kSegmentGroups - geometry.lead_groups) * kGroupCols : 0;
  const std::int64_t block_elems = ggml_block_elements(type);
  const std::int64_t block_bytes = ggml_block_bytes(type);
  const std::int64_t groups_per_block = block_elems / kGroupCols;
  const std::vector<GroupPlace> places =
      group_places(layout, geometry.groups(), geometry.lead_groups);
  const std::byte* panel = geometry.panel(row / kPanelRows);
  const std::int64_t r = row % kPanelRows;
  const std::int64_t blocks = static_cast<std::int64_t>(out.size()) / block_bytes;
  for (std::int64_t b = 0; b < blocks; ++b) {
    BlockValues block;
    for (std::int64_t i = 0; i < groups_per_block; ++i) {
      const std::int64_t g = b * groups_per_block + i - lead_skip / kGroupCols;
      if (g < 0 || g >= geometry.groups()) continue;  // padding: zeros
      read_group(layout, view.format, r, places[static_cast<std::size_t>(g)], panel,
                 block.groups[static_cast<std::size_t>(i)], block);
    }
    encode_block(view.format, block, out.data() + b * block_bytes);
  }
  return lead_skip;
}

void decode_quant_row(const PackedView& view, std::int64_t row, std::span<QuantGroupValues> groups,
                      std::span<QuantSegmentValues> segments) {
  const PanelGeometry geometry = panel_geometry(view);
  const QuantLayout layout = quant_layout(view.format);
  SELFSPEC_CHECK(row >= 0 && row < view.rows, "decode: row {} outside [0, {})", row, view.rows);
  SELFSPEC_CHECK(static_cast<std::int64_t>(groups.size()) == geometry.groups() &&
                     static_cast<std::int64_t>(segments.size()) == geometry.segments(),
                 "decode: {} groups and {} segments given, the row has {} and {}", groups.size(),
                 segments.size(), geometry.groups(), geometry.segments());
  const std::vector<GroupPlace> places =
      group_places(layout, geometry.groups(), geometry.lead_groups);
  const std::byte* panel = geometry.panel(row / kPanelRows);
  const std::int64_t r = row % kPanelRows;
  std::int64_t segment = -1;
  std::int64_t last_place = -1;
  for (std::size_t g = 0; g < places.size(); ++g) {
    if (places[g].segment_params != last_place) {
      last_place = places[g].segment_params;
      ++segment;
    }
    GroupValues values;
    BlockValues block;
    read_group(layout, view.format, r, places[g], panel, values, block);
    groups[g] = quant_group_values(values);
    segments[static_cast<std::size_t>(segment)] = {block.d, block.dmin};
  }
}

std::int64_t gguf_lead_groups(WeightFormat format, std::int64_t skip) {
  return lead_groups_for(quant_layout(format), skip);
}

std::int64_t gguf_row_segments(WeightFormat format, std::int64_t cols, std::int64_t skip) {
  const std::int64_t groups = cols / kGroupCols;
  const std::int64_t lead = gguf_lead_groups(format, skip);
  const std::int64_t rest = groups > lead ? groups - lead : 0;
  return (groups > 0 ? 1 : 0) + (rest + kSegmentGroups - 1) / kSegmentGroups;
}

void decode_gguf_row(const GgufRows& in, std::int64_t row, std::span<QuantGroupValues> groups,
                     std::span<QuantSegmentValues> segments) {
  const QuantLayout layout = quant_layout(in.format);
  check_slice(in, "decode");
  SELFSPEC_CHECK(row >= 0 && row < in.rows, "decode: row {} outside [0, {})", row, in.rows);
  const std::int64_t n_groups = in.cols / kGroupCols;
  const std::int64_t n_segments = gguf_row_segments(in.format, in.cols, in.skip);
  SELFSPEC_CHECK(static_cast<std::int64_t>(groups.size()) == n_groups &&
                     static_cast<std::int64_t>(segments.size()) == n_segments,
                 "decode: {} groups and {} segments given, the row has {} and {}", groups.size(),
                 segments.size(), n_groups, n_segments);
  std::fill(segments.begin(), segments.end(), QuantSegmentValues{});
  SliceRowBlocks blocks(in.format, in.data + row * in.row_stride, in.skip);
  for (std::int64_t g = 0; g < n_groups; ++g) {
    const GroupValues& values = blocks.group(g);
    const BlockValues& block = blocks.block();
    SELFSPEC_CHECK(finite_scales(layout, values, block),
                   "{} block at row {}, column {} of the slice has a non-finite f16 scale (a "
                   "malformed file)",
                   weight_format_name(in.format), row, g * kGroupCols);
    groups[static_cast<std::size_t>(g)] = quant_group_values(values);
    if (layout.k_quant) {  // a K format's segment is its super-block
      segments[static_cast<std::size_t>(blocks.block_index())] = {block.d, block.dmin};
    }
  }
}

// ---- bf16 ----------------------------------------------------------------------------------

std::int64_t packed_bf16_bytes(std::int64_t rows, std::int64_t cols) {
  const std::int64_t steps = (cols + kBf16StepCols - 1) / kBf16StepCols;
  return kPackedHeaderBytes + panel_count(rows) * steps * kPanelRows * kBf16StepCols * 2;
}

void pack_bf16_rows(const std::uint16_t* data, std::int64_t rows, std::int64_t cols,
                    std::int64_t row_stride, std::span<std::byte> out) {
  SELFSPEC_CHECK(rows > 0 && cols > 0 && row_stride >= cols && data != nullptr,
                 "pack bf16: bad matrix (rows {}, cols {}, stride {})", rows, cols, row_stride);
  SELFSPEC_CHECK(static_cast<std::int64_t>(out.size()) == packed_bf16_bytes(rows, cols),
                 "pack bf16: output of {} bytes, expected {}", out.size(),
                 packed_bf16_bytes(rows, cols));
  const std::int64_t steps = (cols + kBf16StepCols - 1) / kBf16StepCols;
  const std::int64_t panel_bytes = steps * kPanelRows * kBf16StepCols * 2;
  std::memset(out.data(), 0, out.size());
  write_header(out, WeightFormat::kBF16, rows, cols, panel_bytes, 0);
  auto* panels = reinterpret_cast<std::uint16_t*>(out.data() + kPackedHeaderBytes);
  parallel_for(panel_count(rows), 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      std::uint16_t* panel = panels + p * (panel_bytes / 2);
      for (std::int64_t r = 0; r < kPanelRows && p * kPanelRows + r < rows; ++r) {
        const std::uint16_t* row = data + (p * kPanelRows + r) * row_stride;
        for (std::int64_t c = 0; c < cols; ++c) {
          // step s = c / 8, block j = (c % 8) / 2, lane r, element c % 2
          const std::int64_t s = c / kBf16StepCols;
          const std::int64_t j = (c % kBf16StepCols) / 2;
          panel[s * 128 + j * 32 + r * 2 + c % 2] = row[c];
        }
      }
    }
  });
}

void unpack_bf16_row(const PackedView& view, std::int64_t row, std::span<std::uint16_t> out) {
  const PanelGeometry g = panel_geometry(view);
  SELFSPEC_CHECK(row >= 0 && row < view.rows && static_cast<std::int64_t>(out.size()) == view.cols,
                 "unpack bf16: row {} of {} into {} values", row, view.rows, out.size());
  const auto* panel = reinterpret_cast<const std::uint16_t*>(g.panel(row / kPanelRows));
  const std::int64_t r = row % kPanelRows;
  for (std::int64_t c = 0; c < view.cols; ++c) {
    out[static_cast<std::size_t>(c)] =
        panel[(c / kBf16StepCols) * 128 + ((c % kBf16StepCols) / 2) * 32 + r * 2 + c % 2];
  }
}

// ---- Either ---------------------------------------------------------------------------------

void dequantize_packed_row(const PackedView& view, std::int64_t row, std::span<float> out) {
  SELFSPEC_CHECK(static_cast<std::int64_t>(out.size()) == view.cols,
                 "dequantize row: {} values for {} columns", out.size(), view.cols);
  if (view.format == WeightFormat::kBF16) {
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(view.cols));
    unpack_bf16_row(view, row, bits);
    for (std::size_t c = 0; c < bits.size(); ++c) out[c] = bf16_to_f32(bits[c]);
    return;
  }
  std::vector<std::byte> blocks(static_cast<std::size_t>(unpacked_row_bytes(view)));
  const std::int64_t lead_skip = unpack_quant_row(view, row, blocks);
  const GgmlType type = ggml_type_of(view.format);
  const std::int64_t elems =
      static_cast<std::int64_t>(blocks.size()) / ggml_block_bytes(type) * ggml_block_elements(type);
  std::vector<float> values(static_cast<std::size_t>(elems));
  dequantize_ggml(type, blocks, values);
  std::copy_n(values.begin() + lead_skip, view.cols, out.begin());
}

std::vector<std::byte> select_packed_rows(const PackedView& view,
                                          std::span<const std::int32_t> rows) {
  SELFSPEC_CHECK(!rows.empty(), "select rows: no rows");
  for (const std::int32_t r : rows) {
    SELFSPEC_CHECK(r >= 0 && r < view.rows, "select rows: row {} outside [0, {})", r, view.rows);
  }
  const auto n = static_cast<std::int64_t>(rows.size());
  if (view.format == WeightFormat::kBF16) {
    std::vector<std::uint16_t> dense(static_cast<std::size_t>(n * view.cols));
    for (std::int64_t i = 0; i < n; ++i) {
      unpack_bf16_row(view, rows[static_cast<std::size_t>(i)],
                      std::span(dense).subspan(static_cast<std::size_t>(i * view.cols),
                                               static_cast<std::size_t>(view.cols)));
    }
    std::vector<std::byte> out(static_cast<std::size_t>(packed_bf16_bytes(n, view.cols)));
    pack_bf16_rows(dense.data(), n, view.cols, view.cols, out);
    return out;
  }
  const std::int64_t row_bytes = unpacked_row_bytes(view);
  std::vector<std::byte> blocks(static_cast<std::size_t>(n * row_bytes));
  std::int64_t skip = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    skip = unpack_quant_row(view, rows[static_cast<std::size_t>(i)],
                            std::span(blocks).subspan(static_cast<std::size_t>(i * row_bytes),
                                                      static_cast<std::size_t>(row_bytes)));
  }
  std::vector<std::byte> out(
      static_cast<std::size_t>(packed_quant_bytes(view.format, n, view.cols, skip)));
  pack_quant_rows({view.format, blocks.data(), n, row_bytes, skip, view.cols}, out);
  return out;
}

std::vector<std::byte> select_packed_cols(const PackedView& view, std::int64_t begin,
                                          std::int64_t end) {
  SELFSPEC_CHECK(0 <= begin && begin < end && end <= view.cols, "select columns [{}, {}) of {}",
                 begin, end, view.cols);
  const std::int64_t cols = end - begin;
  if (view.format == WeightFormat::kBF16) {
    std::vector<std::uint16_t> row(static_cast<std::size_t>(view.cols));
    std::vector<std::uint16_t> dense(static_cast<std::size_t>(view.rows * cols));
    for (std::int64_t r = 0; r < view.rows; ++r) {
      unpack_bf16_row(view, r, row);
      std::copy_n(row.begin() + begin, cols, dense.begin() + r * cols);
    }
    std::vector<std::byte> out(static_cast<std::size_t>(packed_bf16_bytes(view.rows, cols)));
    pack_bf16_rows(dense.data(), view.rows, cols, cols, out);
    return out;
  }
  SELFSPEC_CHECK(begin % kGroupCols == 0 && end % kGroupCols == 0,
                 "select columns [{}, {}) of a {} matrix: not at 32-column boundaries", begin, end,
                 weight_format_name(view.format));
  const GgmlType type = ggml_type_of(view.format);
  const std::int64_t block_elems = ggml_block_elements(type);
  const std::int64_t block_bytes = ggml_block_bytes(type);
  const std::int64_t row_bytes = unpacked_row_bytes(view);
  std::vector<std::byte> blocks(static_cast<std::size_t>(view.rows * row_bytes));
  std::int64_t lead_skip = 0;
  for (std::int64_t r = 0; r < view.rows; ++r) {
    lead_skip = unpack_quant_row(view, r,
                                 std::span(blocks).subspan(static_cast<std::size_t>(r * row_bytes),
                                                           static_cast<std::size_t>(row_bytes)));
  }
  const std::int64_t first = lead_skip + begin;  // column of the slice in the unpacked blocks
  const GgufRows slice{view.format,         blocks.data() + first / block_elems * block_bytes,
                       view.rows,           row_bytes,
                       first % block_elems, cols};
  std::vector<std::byte> out(
      static_cast<std::size_t>(packed_quant_bytes(view.format, view.rows, cols, slice.skip)));
  pack_quant_rows(slice, out);
  return out;
}

}  // namespace selfspec::kernels::cpu
