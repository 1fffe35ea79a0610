// Row-panel layouts of the CPU backend's bf16 and quantized weights: what the matmul kernels
// stream, built once at load.
//
// Why panels: a decode matmul is bound by streaming its weights. Reading several rows at a time
// from a row-major matrix is several interleaved streams, which one core reads at about half the
// speed of one sequential stream (measured: 14-15 against 24-27 GB/s on 4 KB pages). In a panel,
// the 16 rows of an output tile are interleaved so that a tile's whole working set is one
// contiguous stretch of memory, read front to back: one stream per thread, and every byte the
// kernel loads is a byte it uses. Each SIMD lane holds one row, so no horizontal reduction is
// needed and a group's scale is a plain vector of 16 rows' scales.
//
// A packed matrix is a 64-byte header (format, shape, segment phase, panel size) followed by
// ceil(rows / 16) panels of equal size; the rows of the last panel past `rows` are zero.
//
// bf16 panels (kernels/cpu/bf16_matmul.hpp): columns padded with zeros to a multiple of 8; per
// step of 8 columns, 4 blocks of 64 bytes; block j holds, for lane (row) r, the bf16 pair of
// columns 8s + 2j, 8s + 2j + 1 (the pair vdpbf16ps multiplies: even element low).
//
// Quantized panels (kernels/cpu/quant_matmul.hpp): the columns (a multiple of 32) are groups of
// 32; groups form segments of at most 8 (256 columns). For the K formats a segment is what is left
// of one of the file's 256-column super-blocks (a rank's column slice may start or end inside
// one, at a 32-column boundary); for the formats in blocks of 32 segments are 8 groups from the
// slice's start. Per segment, for the panel's 16 rows:
//   segment parameters (K formats): Q4_K/Q5_K d[16], dmin[16] (f16); Q6_K d[16] (f16);
//   then per group: the group's parameters, then its quants:
//     parameters: Q4_0/Q5_0/Q8_0 d[16] (f16); Q4_1/Q5_1 d[16], m[16] (f16); Q4_K/Q5_K sc[16],
//                 m[16] (u8, the 6-bit scale and min); Q6_K sc[16] of columns 0-15, sc[16] of
//                 columns 16-31 (i8);
//     quants, as unsigned integers u (Q8_0: q + 128; otherwise the file's q) in 4-column
//     lanes: W_k (k < 8) is 16 rows x columns 4k..4k+3, byte 4r + c = u(r, 4k + c), the
//     vpdpbusd operand;
//       4 bits: 4 blocks of 64 bytes, block j = W_j | W_{j+4} << 4;
//       5 bits: the low 4 bits as above, then 8 masks of 64 bits: bit 4r + c of mask k = bit 4 of
//               W_k's byte 4r + c;
//       6 bits: the low 4 bits as above, then 2 blocks of 64 bytes: block h holds bits 4-5 of
//               W_{4h+i} at bits 2i..2i+1 of each byte;
//       8 bits: 8 blocks of 64 bytes, block k = W_k.
// Every value of the file is kept exactly (f16 scales as f16, 6-bit scales as bytes), so a
// packed matrix unpacks to the file's blocks bit for bit, and the bytes are within 3% of the
// file's (Q4_K: 4.625 bits a weight against 4.5; the others equal).
#pragma once

#include "core/weight_format.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace selfspec::kernels::cpu {

inline constexpr std::int64_t kPanelRows = 16;
inline constexpr std::int64_t kPackedHeaderBytes = 64;
inline constexpr std::int64_t kGroupCols = 32;
inline constexpr std::int64_t kSegmentGroups = 8;
inline constexpr std::int64_t kBf16StepCols = 8;

// A packed matrix in backend memory (header included). Non-owning.
struct PackedView {
  WeightFormat format = WeightFormat::kBF16;
  const void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// What a kernel needs to walk a packed matrix, read from (and checked against) its header.
struct PanelGeometry {
  WeightFormat format = WeightFormat::kBF16;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t panels = 0;
  std::int64_t panel_bytes = 0;
  std::int64_t lead_groups = 0;  // groups in the first segment (quantized formats), 1..8
  const std::byte* first_panel = nullptr;

  std::int64_t groups() const { return cols / kGroupCols; }
  // Groups in segment s (quantized formats); segments() of them.
  std::int64_t segments() const {
    const std::int64_t rest = groups() > lead_groups ? groups() - lead_groups : 0;
    return (groups() > 0 ? 1 : 0) + (rest + kSegmentGroups - 1) / kSegmentGroups;
  }
  std::int64_t segment_groups(std::int64_t s) const {
    if (s == 0) return groups() < lead_groups ? groups() : lead_groups;
    const std::int64_t left = groups() - lead_groups - (s - 1) * kSegmentGroups;
    return left < kSegmentGroups ? left : kSegmentGroups;
  }
  const std::byte* panel(std::int64_t p) const { return first_panel + p * panel_bytes; }
};

// Checks the view against its header (format, shape, magic); throws naming what differs.
PanelGeometry panel_geometry(const PackedView& view);

// How a matmul splits a packed matrix's panels over the worker threads: one contiguous stretch
// per thread (at least 64 KiB of weights), so each thread reads one long sequential stream.
// Measured on 8960 x 1536 Q4_K with 2 threads (packed_matmul_bench): 1.06 of the streaming read
// bandwidth with one stretch per thread, 0.70 with 64 KiB chunks claimed in turn.
std::int64_t panels_per_chunk(const PanelGeometry& g);

// Bit width, offset and byte counts of a quantized format's panels (per 16-row panel).
struct QuantLayout {
  int bits = 4;                     // 4, 5, 6 or 8
  int offset = 0;                   // subtracted from u (Q4_0 8, Q5_0 16, Q8_0 128, Q6_K 32)
  bool k_quant = false;             // segments follow the file's super-blocks, scales per segment
  std::int64_t segment_params = 0;  // bytes per segment
  std::int64_t group_params = 0;    // bytes per group
  std::int64_t quant_bytes = 0;     // bytes of quants per group
  std::int64_t group_bytes() const { return group_params + quant_bytes; }
};
QuantLayout quant_layout(WeightFormat format);
// The ggml type whose blocks a quantized format holds (throws for bf16 and the dense formats).
GgmlType ggml_type_of(WeightFormat format);

// ---- Quantized matrices: GGUF blocks in, GGUF blocks out ----

// The rows of a matrix slice as a GGUF file stores them: row r's blocks start at
// data + r * row_stride; the slice is the columns [skip, skip + cols) of those blocks. skip is a
// multiple of 32 (below the block size), cols a positive multiple of 32, and the blocks cover
// skip + cols columns.
struct GgufRows {
  WeightFormat format = WeightFormat::kQ4_0;
  const std::byte* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t row_stride = 0;
  std::int64_t skip = 0;
  std::int64_t cols = 0;
};

// Bytes of the packed form of a slice (header included).
std::int64_t packed_quant_bytes(WeightFormat format, std::int64_t rows, std::int64_t cols,
                                std::int64_t skip);
// Packs the slice into `out` (packed_quant_bytes of it). Throws on a bad shape or format, and
// on a block whose f16 scale is not finite (a malformed file), naming the row and column.
void pack_quant_rows(const GgufRows& rows, std::span<std::byte> out);
// Row `row` of a packed quantized matrix as GGUF blocks: `out` receives whole blocks covering
// lead_skip + cols columns, where lead_skip = (8 - lead_groups) * 32 for the K formats (the
// columns before the slice's first group in its super-block, zero) and 0 otherwise. Returns
// lead_skip. out.size() must be unpacked_row_bytes(view).
std::int64_t unpack_quant_row(const PackedView& view, std::int64_t row, std::span<std::byte> out);
std::int64_t unpacked_row_bytes(const PackedView& view);

// One group of a packed quantized row, decoded: its unsigned quants and the parameters the
// canonical arithmetic reads (quant_matmul.hpp; which ones a format has: the layout above).
struct QuantGroupValues {
  std::array<std::uint8_t, 32> u{};
  std::uint16_t d = 0;  // f16 bits: Q4_0/Q5_0/Q8_0/Q4_1/Q5_1 scale
  std::uint16_t m = 0;  // f16 bits: Q4_1/Q5_1 min
  std::uint8_t sc = 0;  // Q4_K/Q5_K 6-bit scale and min
  std::uint8_t mn = 0;
  std::array<std::int8_t, 2> sc16{};  // Q6_K scales of columns 0-15 and 16-31
};
// One segment's parameters (K formats): the super-block's d and dmin (f16 bits).
struct QuantSegmentValues {
  std::uint16_t d = 0;
  std::uint16_t dmin = 0;
};
// Row `row` of a packed quantized matrix: groups[i] for i < cols / 32 in column order, and
// segments[s] for s < PanelGeometry::segments() (the K formats' scales; zeros otherwise). Other
// backends' layouts are built from this (the CUDA backend's quantized rows).
void decode_quant_row(const PackedView& view, std::int64_t row, std::span<QuantGroupValues> groups,
                      std::span<QuantSegmentValues> segments);

// The same values straight from the file's blocks, without packing (the CUDA backend's load):
// row `row` of a GGUF slice, groups[i] for i < cols / 32 and segments[s] for
// s < gguf_row_segments(format, cols, skip); the values decode_quant_row gives for the packed form
// of the slice. Throws, as pack_quant_rows does, on a bad shape and on a non-finite f16 scale
// (naming the row and column).
void decode_gguf_row(const GgufRows& rows, std::int64_t row, std::span<QuantGroupValues> groups,
                     std::span<QuantSegmentValues> segments);
// The groups of a slice's first segment (PanelGeometry::lead_groups of its packed form): 8, less
// the groups a K-format slice skips in its first super-block.
std::int64_t gguf_lead_groups(WeightFormat format, std::int64_t skip);
// PanelGeometry::segments() of the slice's packed form.
std::int64_t gguf_row_segments(WeightFormat format, std::int64_t cols, std::int64_t skip);

// ---- bf16 matrices ----

std::int64_t packed_bf16_bytes(std::int64_t rows, std::int64_t cols);
// Packs row-major bf16 [rows x cols] (row stride `row_stride` elements) into `out`.
void pack_bf16_rows(const std::uint16_t* data, std::int64_t rows, std::int64_t cols,
                    std::int64_t row_stride, std::span<std::byte> out);
// Row `row` of a packed bf16 matrix into out[cols].
void unpack_bf16_row(const PackedView& view, std::int64_t row, std::span<std::uint16_t> out);

// ---- Either ----

// Bytes of a packed matrix of this view's shape, as its header says.
std::int64_t packed_bytes(const PackedView& view);
// Row `row` as f32: the values the file's dequantization gives (ggml's, bit for bit), or the bf16
// values. out.size() == view.cols.
void dequantize_packed_row(const PackedView& view, std::int64_t row, std::span<float> out);
// A new packed matrix of the given rows of `view` (in that order): the draft vocabulary's LM head.
std::vector<std::byte> select_packed_rows(const PackedView& view,
                                          std::span<const std::int32_t> rows);
// A new packed matrix of the columns [begin, end) of `view` (quantized: multiples of 32).
std::vector<std::byte> select_packed_cols(const PackedView& view, std::int64_t begin,
                                          std::int64_t end);

}  // namespace selfspec::kernels::cpu
