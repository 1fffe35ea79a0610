#include "backend/quant_rows_builder.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "kernels/cuda/quant_rows.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>

namespace selfspec {
namespace {

namespace kc = kernels::cpu;
namespace kq = kernels::cuda;

kq::QuantRowsHeader read_header(std::span<const std::byte> bytes) {
  SELFSPEC_CHECK(bytes.size() >= static_cast<std::size_t>(kq::kQuantRowsHeaderBytes),
                 "quantized rows: {} bytes, no header", bytes.size());
  kq::QuantRowsHeader header;
  std::memcpy(&header, bytes.data(), sizeof header);
  SELFSPEC_CHECK(header.magic == kq::kQuantRowsMagic, "quantized rows: bad header");
  return header;
}

kq::QuantRowsLayout layout_of(const kq::QuantRowsHeader& header, std::size_t size) {
  const auto format = static_cast<WeightFormat>(header.format);
  const kq::QuantRowsLayout l = kq::quant_rows_layout(format, header.rows, header.cols);
  SELFSPEC_CHECK(l.bits != 0 && static_cast<std::size_t>(l.bytes) == size,
                 "quantized rows: {} [{} x {}] takes {} bytes, not {}", weight_format_name(format),
                 header.rows, header.cols, l.bytes, size);
  return l;
}

// The stored byte(s) of a group: quants as quant_rows.hpp lays them out.
void store_quants(const kq::QuantRowsLayout& l, const kc::QuantGroupValues& g, std::byte* out) {
  if (l.bits == 4) {
    for (int i = 0; i < 16; ++i) {
      out[i] = static_cast<std::byte>((g.u[static_cast<std::size_t>(i)] & 0xF) |
                                      (g.u[static_cast<std::size_t>(i + 16)] & 0xF) << 4);
    }
    return;
  }
  for (int i = 0; i < 32; ++i) {
    const int u = g.u[static_cast<std::size_t>(i)];
    out[i] = static_cast<std::byte>(l.format == WeightFormat::kQ8_0 ? u - 128 : u);
  }
}

// The stored value of column i of a group (u, or u − 128 for Q8_0).
int stored_value(const kq::QuantRowsLayout& l, const std::byte* quants, int i) {
  if (l.bits == 4) {
    const auto byte = std::to_integer<int>(quants[i % 16]);
    return i < 16 ? byte & 0xF : byte >> 4;
  }
  const auto byte = std::to_integer<std::uint8_t>(quants[i]);
  return l.format == WeightFormat::kQ8_0 ? static_cast<std::int8_t>(byte) : byte;
}

void store_params(const kq::QuantRowsLayout& l, const kc::QuantGroupValues& g, std::byte* out) {
  kq::QuantGroupParams p;
  switch (l.format) {
    case WeightFormat::kQ4_0:
    case WeightFormat::kQ5_0:
    case WeightFormat::kQ8_0:
      p.lo = g.d;
      break;
    case WeightFormat::kQ4_1:
    case WeightFormat::kQ5_1:
      p.lo = g.d;
      p.hi = g.m;
      break;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K:
      p.lo = static_cast<std::uint16_t>(g.sc | g.mn << 8);
      break;
    case WeightFormat::kQ6_K:
      p.lo = static_cast<std::uint16_t>(static_cast<std::uint8_t>(g.sc16[0]) |
                                        static_cast<std::uint8_t>(g.sc16[1]) << 8);
      break;
    default:
      break;
  }
  std::memcpy(out, &p, static_cast<std::size_t>(l.param_bytes));
}

kq::QuantGroupParams load_params(const kq::QuantRowsLayout& l, const std::byte* base,
                                 std::int64_t row, std::int64_t g) {
  kq::QuantGroupParams p;
  std::memcpy(&p, base + l.params + (row * l.groups + g) * l.param_bytes,
              static_cast<std::size_t>(l.param_bytes));
  return p;
}

void load_segment(const kq::QuantRowsLayout& l, const std::byte* base, std::int64_t row,
                  std::int64_t s, std::uint16_t& d, std::uint16_t& dmin) {
  const std::byte* p = base + l.segments + (row * l.max_segments + s) * 4;
  std::memcpy(&d, p, 2);
  std::memcpy(&dmin, p + 2, 2);
}

// Row r's decoded groups and segments into their places in `out` (the layout l).
void store_row(const kq::QuantRowsLayout& l, std::int64_t r,
               std::span<const kc::QuantGroupValues> groups,
               std::span<const kc::QuantSegmentValues> segments, std::byte* out) {
  for (std::int64_t g = 0; g < l.groups; ++g) {
    const kc::QuantGroupValues& values = groups[static_cast<std::size_t>(g)];
    store_quants(l, values, out + l.quants + (r * l.groups + g) * l.quant_bytes);
    store_params(l, values, out + l.params + (r * l.groups + g) * l.param_bytes);
  }
  for (std::size_t s = 0; s < segments.size(); ++s) {
    std::byte* p = out + l.segments + (r * l.max_segments + static_cast<std::int64_t>(s)) * 4;
    std::memcpy(p, &segments[s].d, 2);
    std::memcpy(p + 2, &segments[s].dmin, 2);
  }
}

kq::QuantRowsLayout checked_layout(const HostWeight& host) {
  SELFSPEC_CHECK(is_quantized(host.format) && host.rows > 0 && host.cols > 0 &&
                     host.cols % kq::kQuantGroupCols == 0,
                 "quantized rows: {} [{} x {}] (a quantized format, columns a multiple of 32)",
                 weight_format_name(host.format), host.rows, host.cols);
  return kq::quant_rows_layout(host.format, host.rows, host.cols);
}

// Every byte of `out` zero, in parallel stretches of 1 MiB (the first touch of fresh pages too).
void zero_in_parallel(std::span<std::byte> out) {
  constexpr std::int64_t kStretch = std::int64_t{1} << 20;
  const auto size = static_cast<std::int64_t>(out.size());
  parallel_for((size + kStretch - 1) / kStretch, 1, [&](std::int64_t begin, std::int64_t end) {
    const std::int64_t first = begin * kStretch;
    const std::int64_t last = std::min(size, end * kStretch);
    std::memset(out.data() + first, 0, static_cast<std::size_t>(last - first));
  });
}

}  // namespace

std::size_t quant_rows_bytes(const HostWeight& host) {
  return static_cast<std::size_t>(checked_layout(host).bytes);
}

std::vector<std::byte> build_quant_rows(const HostWeight& host) {
  std::vector<std::byte> out(quant_rows_bytes(host));
  build_quant_rows_into(host, out);
  return out;
}

void build_quant_rows_into(const HostWeight& host, std::span<std::byte> out) {
  const kq::QuantRowsLayout l = checked_layout(host);
  SELFSPEC_CHECK(out.size() == static_cast<std::size_t>(l.bytes),
                 "quantized rows: {} bytes for a matrix of {}", out.size(), l.bytes);
  // The values the CPU's packed form holds, decoded straight from the file's blocks (no packed
  // copy: a 70B-geometry load spent most of its host time packing and unpacking).
  const kc::GgufRows gguf{host.format, static_cast<const std::byte*>(host.data),
                          host.rows,   host.row_stride_bytes,
                          host.skip,   host.cols};
  zero_in_parallel(out);  // the padding, and whatever the buffer held before
  kq::QuantRowsHeader header;
  header.format = static_cast<std::uint32_t>(host.format);
  header.rows = host.rows;
  header.cols = host.cols;
  header.lead_groups = kc::gguf_lead_groups(host.format, host.skip);
  std::memcpy(out.data(), &header, sizeof header);
  const std::int64_t n_segments = kc::gguf_row_segments(host.format, host.cols, host.skip);

  // Rows are independent: decoded in parallel stretches (a 70B-geometry model has 6.7 million).
  // An error may not leave the parallel region: the first failing row's is kept and rethrown.
  std::atomic<std::int64_t> bad_row{host.rows};
  std::exception_ptr error;
  parallel_for(host.rows, 64, [&](std::int64_t begin, std::int64_t end) {
    std::vector<kc::QuantGroupValues> groups(static_cast<std::size_t>(l.groups));
    std::vector<kc::QuantSegmentValues> segments(static_cast<std::size_t>(n_segments));
    for (std::int64_t r = begin; r < end && r < bad_row.load(); ++r) {
      try {
        kc::decode_gguf_row(gguf, r, groups, segments);
      } catch (...) {
#pragma omp critical(build_quant_rows_error)
        if (r < bad_row.load()) {
          bad_row.store(r);
          error = std::current_exception();
        }
        return;
      }
      store_row(l, r, groups, segments, out.data());
    }
  });
  if (error) std::rethrow_exception(error);
}

std::vector<std::byte> select_quant_rows(std::span<const std::byte> rows_bytes,
                                         std::span<const std::int32_t> rows) {
  const kq::QuantRowsHeader header = read_header(rows_bytes);
  const kq::QuantRowsLayout from = layout_of(header, rows_bytes.size());
  SELFSPEC_CHECK(!rows.empty(), "select rows: no rows");
  const auto n = static_cast<std::int64_t>(rows.size());
  const kq::QuantRowsLayout to = kq::quant_rows_layout(from.format, n, from.cols);
  std::vector<std::byte> out(static_cast<std::size_t>(to.bytes));
  kq::QuantRowsHeader out_header = header;
  out_header.rows = n;
  std::memcpy(out.data(), &out_header, sizeof out_header);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t r = rows[static_cast<std::size_t>(i)];
    SELFSPEC_CHECK(r >= 0 && r < from.rows, "select rows: row {} outside [0, {})", r, from.rows);
    const auto copy = [&](std::int64_t from_section, std::int64_t to_section,
                          std::int64_t row_bytes) {
      std::memcpy(out.data() + to_section + i * row_bytes,
                  rows_bytes.data() + from_section + r * row_bytes,
                  static_cast<std::size_t>(row_bytes));
    };
    copy(from.quants, to.quants, from.groups * from.quant_bytes);
    copy(from.params, to.params, from.groups * from.param_bytes);
    copy(from.segments, to.segments, from.max_segments * 4);
  }
  return out;
}

kq::QuantGroupSums reference_group_sums(const kq::QuantRowsLayout& l, const std::byte* quants,
                                        const std::int8_t* xq) {
  kq::QuantGroupSums sums;
  for (int i = 0; i < 32; ++i) {
    const std::int32_t product = stored_value(l, quants, i) * xq[i];
    sums.full += product;
    (i < 16 ? sums.half_a : sums.half_b) += product;
  }
  return sums;
}

void reference_quant_matmul(std::span<const std::byte> rows_bytes, const float* x,
                            std::int64_t tokens, float* y) {
  const kq::QuantRowsHeader header = read_header(rows_bytes);
  const kq::QuantRowsLayout l = layout_of(header, rows_bytes.size());
  kc::QuantizedActivations a;
  kc::quantize_activations(x, tokens, l.cols, a);
  const std::byte* base = rows_bytes.data();
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t n = 0; n < l.rows; ++n) {
      kq::QuantRowState st;
      for (std::int64_t g = 0; g < l.groups; ++g) {
        const std::byte* quants = base + l.quants + (n * l.groups + g) * l.quant_bytes;
        const kq::QuantGroupSums sums =
            reference_group_sums(l, quants, a.q.data() + t * l.cols + g * kq::kQuantGroupCols);
        const auto tg = static_cast<std::size_t>(t * l.groups + g);
        kq::quant_group_step(l.format, l.offset, load_params(l, base, n, g), sums, a.dx[tg],
                             a.s[tg], a.dxs[tg], a.s32[tg], a.s16[2 * tg], a.s16[2 * tg + 1], st);
        if (l.k_quant && kq::quant_segment_ends(g, header.lead_groups, l.groups)) {
          std::uint16_t d = 0;
          std::uint16_t dmin = 0;
          load_segment(l, base, n, kq::quant_segment_of(g, header.lead_groups), d, dmin);
          kq::quant_segment_end(l.format, kq::qr_f16(d), kq::qr_f16(dmin), st);
        }
      }
      y[t * l.rows + n] = st.y;
    }
  }
}

void reference_quant_dequantize_row(std::span<const std::byte> rows_bytes, std::int64_t row,
                                    float* out) {
  const kq::QuantRowsHeader header = read_header(rows_bytes);
  const kq::QuantRowsLayout l = layout_of(header, rows_bytes.size());
  SELFSPEC_CHECK(row >= 0 && row < l.rows, "dequantize: row {} outside [0, {})", row, l.rows);
  const std::byte* base = rows_bytes.data();
  for (std::int64_t g = 0; g < l.groups; ++g) {
    std::uint16_t d = 0;
    std::uint16_t dmin = 0;
    if (l.k_quant) load_segment(l, base, row, kq::quant_segment_of(g, header.lead_groups), d, dmin);
    const std::byte* quants = base + l.quants + (row * l.groups + g) * l.quant_bytes;
    const kq::QuantGroupParams p = load_params(l, base, row, g);
    for (int i = 0; i < 32; ++i) {
      out[g * kq::kQuantGroupCols + i] =
          kq::quant_dequantize(l.format, stored_value(l, quants, i), i, p, d, dmin);
    }
  }
}

}  // namespace selfspec
