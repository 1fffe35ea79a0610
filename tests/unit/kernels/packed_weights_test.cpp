// Row panels (kernels/cpu/packed_weights.hpp): packing GGUF blocks and unpacking them gives the
// file's bytes back; a panel row dequantizes to ggml's values; slices cut at 32-column
// boundaries inside super-blocks, row selections and column selections keep every value; bf16
// panels round-trip; malformed input is an error naming where.
#include "kernels/cpu/packed_weights.hpp"

#include "core/error.hpp"
#include "kernel_test_util.hpp"
#include "quant_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

namespace selfspec::kernels::cpu::test {
namespace {

struct Packed {
  WeightFormat format;
  std::int64_t rows;
  std::int64_t cols;
  std::vector<std::byte> bytes;
  PackedView view() const { return {format, bytes.data(), rows, cols}; }
};

// A slice of GGUF rows, packed.
Packed pack_slice(const GgufRows& rows) {
  Packed p{rows.format, rows.rows, rows.cols, {}};
  p.bytes.resize(
      static_cast<std::size_t>(packed_quant_bytes(rows.format, rows.rows, rows.cols, rows.skip)));
  pack_quant_rows(rows, p.bytes);
  return p;
}

// Columns [skip, skip + cols) of every row of m, packed.
Packed pack(const GgufMatrix& m, std::int64_t skip, std::int64_t cols) {
  return pack_slice({m.format, m.data.data(), m.rows, m.row_bytes, skip, cols});
}

// A rank's column slice [begin, end) as the loader hands it over: the blocks covering it and the
// skip inside the first one.
GgufRows column_slice(const GgufMatrix& m, std::int64_t begin, std::int64_t end) {
  const std::int64_t first_block = begin / m.block_elems;
  return {m.format,
          m.data.data() + first_block * ggml_block_bytes(ggml_type_of(m.format)),
          m.rows,
          m.row_bytes,
          begin - first_block * m.block_elems,
          end - begin};
}

// The column slices both slice tests take: inside super-blocks or not, a single group.
const std::pair<std::int64_t, std::int64_t> kColumnSlices[] = {{0, 512},   {32, 512},  {96, 160},
                                                               {224, 288}, {256, 480}, {0, 32}};

std::vector<float> packed_row(const Packed& p, std::int64_t r) {
  std::vector<float> out(static_cast<std::size_t>(p.cols));
  dequantize_packed_row(p.view(), r, out);
  return out;
}

class PackedQuant : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(PackedQuant, UnpacksToTheFileBytes) {
  std::mt19937 rng(11);
  for (const std::int64_t rows : {1, 15, 16, 17, 40}) {
    for (const std::int64_t blocks : {1, 3, 9}) {
      SCOPED_TRACE(::testing::Message() << "rows " << rows << " blocks " << blocks);
      const GgufMatrix m = random_gguf_matrix(rng, GetParam(), rows, blocks);
      const Packed p = pack(m, 0, m.cols());
      ASSERT_EQ(static_cast<std::int64_t>(p.bytes.size()), packed_bytes(p.view()));
      std::vector<std::byte> row(static_cast<std::size_t>(unpacked_row_bytes(p.view())));
      ASSERT_EQ(static_cast<std::int64_t>(row.size()), m.row_bytes);
      for (std::int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(unpack_quant_row(p.view(), r, row), 0);
        ASSERT_EQ(std::memcmp(row.data(), m.row(r), row.size()), 0) << "row " << r;
        ASSERT_TRUE(same_bits(packed_row(p, r), m.dequantized_row(r))) << "row " << r;
      }
    }
  }
}

// A rank's column slice: any 32-column boundaries, inside super-blocks or not.
TEST_P(PackedQuant, ColumnSlicesKeepTheFileValues) {
  std::mt19937 rng(12);
  const GgufMatrix m =
      random_gguf_matrix(rng, GetParam(), 21, 512 / ggml_block_elements(ggml_type_of(GetParam())));
  for (const auto& [begin, end] : kColumnSlices) {
    SCOPED_TRACE(::testing::Message() << "columns [" << begin << ", " << end << ")");
    const Packed p = pack_slice(column_slice(m, begin, end));
    for (std::int64_t r = 0; r < m.rows; ++r) {
      const std::vector<float> full = m.dequantized_row(r);
      const std::vector<float> expected(full.begin() + begin, full.begin() + end);
      ASSERT_TRUE(same_bits(packed_row(p, r), expected)) << "row " << r;
    }
    // Selecting columns of the packed slice again is the same as slicing the file there.
    if (end - begin > 64) {
      const std::vector<std::byte> sub = select_packed_cols(p.view(), 32, end - begin - 32);
      const PackedView view{m.format, sub.data(), m.rows, end - begin - 64};
      std::vector<float> got(static_cast<std::size_t>(view.cols));
      for (std::int64_t r = 0; r < m.rows; ++r) {
        const std::vector<float> full = m.dequantized_row(r);
        dequantize_packed_row(view, r, got);
        ASSERT_TRUE(
            same_bits(got, std::vector<float>(full.begin() + begin + 32, full.begin() + end - 32)))
            << "row " << r;
      }
    }
  }
}

// The CUDA backend's load decodes the file's blocks without packing them: the same groups and
// segments as the packed form, on every column slice.
TEST_P(PackedQuant, DecodingTheFileEqualsDecodingItsPackedForm) {
  std::mt19937 rng(16);
  const GgufMatrix m =
      random_gguf_matrix(rng, GetParam(), 19, 512 / ggml_block_elements(ggml_type_of(GetParam())));
  for (const auto& [begin, end] : kColumnSlices) {
    SCOPED_TRACE(::testing::Message() << "columns [" << begin << ", " << end << ")");
    const GgufRows rows = column_slice(m, begin, end);
    const Packed p = pack_slice(rows);
    const PanelGeometry geometry = panel_geometry(p.view());
    ASSERT_EQ(gguf_lead_groups(m.format, rows.skip), geometry.lead_groups);
    ASSERT_EQ(gguf_row_segments(m.format, rows.cols, rows.skip), geometry.segments());
    const auto n_groups = static_cast<std::size_t>(geometry.groups());
    const auto n_segments = static_cast<std::size_t>(geometry.segments());
    std::vector<QuantGroupValues> packed_groups(n_groups), file_groups(n_groups);
    std::vector<QuantSegmentValues> packed_segments(n_segments), file_segments(n_segments);
    for (std::int64_t r = 0; r < m.rows; ++r) {
      decode_quant_row(p.view(), r, packed_groups, packed_segments);
      decode_gguf_row(rows, r, file_groups, file_segments);
      for (std::size_t g = 0; g < n_groups; ++g) {
        const QuantGroupValues& a = packed_groups[g];
        const QuantGroupValues& b = file_groups[g];
        ASSERT_TRUE(a.u == b.u && a.d == b.d && a.m == b.m && a.sc == b.sc && a.mn == b.mn &&
                    a.sc16 == b.sc16)
            << "row " << r << " group " << g;
      }
      for (std::size_t s = 0; s < n_segments; ++s) {
        ASSERT_EQ(packed_segments[s].d, file_segments[s].d) << "row " << r << " segment " << s;
        ASSERT_EQ(packed_segments[s].dmin, file_segments[s].dmin)
            << "row " << r << " segment " << s;
      }
    }
    std::vector<QuantGroupValues> short_groups(n_groups + 1);
    EXPECT_THROW(decode_gguf_row(rows, 0, short_groups, file_segments), selfspec::Error);
    EXPECT_THROW(decode_gguf_row(rows, m.rows, file_groups, file_segments), selfspec::Error);
  }
}

TEST_P(PackedQuant, SelectedRowsKeepTheirValues) {
  std::mt19937 rng(13);
  const GgufMatrix m =
      random_gguf_matrix(rng, GetParam(), 50, 256 / ggml_block_elements(ggml_type_of(GetParam())));
  const Packed p = pack(m, 0, m.cols());
  const std::vector<std::int32_t> picked = {49, 0, 17, 16, 33, 2};
  const std::vector<std::byte> selected = select_packed_rows(p.view(), picked);
  const PackedView view{m.format, selected.data(), static_cast<std::int64_t>(picked.size()),
                        m.cols()};
  std::vector<float> got(static_cast<std::size_t>(m.cols()));
  for (std::size_t i = 0; i < picked.size(); ++i) {
    dequantize_packed_row(view, static_cast<std::int64_t>(i), got);
    ASSERT_TRUE(same_bits(got, m.dequantized_row(picked[i]))) << "row " << picked[i];
  }
}

TEST_P(PackedQuant, NonFiniteScaleIsAnErrorNamingTheBlock) {
  std::mt19937 rng(14);
  GgufMatrix m = random_gguf_matrix(rng, GetParam(), 20, 2);
  const std::uint16_t inf = 0x7C00;
  std::memcpy(m.data.data() + 18 * m.row_bytes + ggml_block_bytes(ggml_type_of(m.format)) +
                  f16_fields(m.format)[0],
              &inf, sizeof inf);
  try {
    (void)pack(m, 0, m.cols());
    FAIL() << "no error";
  } catch (const selfspec::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("row 18"), std::string::npos) << what;
    EXPECT_NE(what.find(fmt::format("column {}", m.block_elems)), std::string::npos) << what;
    EXPECT_NE(what.find("non-finite"), std::string::npos) << what;
  }
  // Decoding the file's blocks directly says the same.
  const GgufRows rows{m.format, m.data.data(), m.rows, m.row_bytes, 0, m.cols()};
  std::vector<QuantGroupValues> groups(static_cast<std::size_t>(m.cols() / 32));
  std::vector<QuantSegmentValues> segments(
      static_cast<std::size_t>(gguf_row_segments(m.format, m.cols(), 0)));
  EXPECT_NO_THROW(decode_gguf_row(rows, 17, groups, segments));
  try {
    decode_gguf_row(rows, 18, groups, segments);
    FAIL() << "no error";
  } catch (const selfspec::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("row 18"), std::string::npos) << what;
    EXPECT_NE(what.find(fmt::format("column {}", m.block_elems)), std::string::npos) << what;
  }
}

TEST_P(PackedQuant, BadShapesAreErrors) {
  std::mt19937 rng(15);
  const GgufMatrix m = random_gguf_matrix(rng, GetParam(), 4, 1);
  std::vector<std::byte> out(1 << 16);
  EXPECT_THROW(pack_quant_rows({m.format, m.data.data(), 4, m.row_bytes, 0, 48}, out),
               selfspec::Error);
  EXPECT_THROW(pack_quant_rows({m.format, m.data.data(), 4, m.row_bytes, 0, 32}, out),
               selfspec::Error);  // wrong output size
  const Packed p = pack(m, 0, m.cols());
  EXPECT_THROW((void)panel_geometry({m.format, p.bytes.data(), 5, m.cols()}), selfspec::Error);
  const WeightFormat other =
      m.format == WeightFormat::kQ4_0 ? WeightFormat::kQ8_0 : WeightFormat::kQ4_0;
  EXPECT_THROW((void)panel_geometry({other, p.bytes.data(), 4, m.cols()}), selfspec::Error);
}

INSTANTIATE_TEST_SUITE_P(Formats, PackedQuant, ::testing::ValuesIn(kQuantizedFormats),
                         [](const ::testing::TestParamInfo<WeightFormat>& param_info) {
                           return std::string(weight_format_name(param_info.param));
                         });

TEST(PackedBf16, RoundTripsAndSelects) {
  std::mt19937 rng(16);
  for (const std::int64_t rows : {1, 16, 37}) {
    for (const std::int64_t cols : {1, 8, 13, 100}) {
      SCOPED_TRACE(::testing::Message() << "rows " << rows << " cols " << cols);
      const StoredWeights w = random_weights(rng, DType::kBF16, rows, cols);
      std::vector<std::byte> packed(static_cast<std::size_t>(packed_bf16_bytes(rows, cols)));
      pack_bf16_rows(w.half.data(), rows, cols, cols, packed);
      const PackedView view{WeightFormat::kBF16, packed.data(), rows, cols};
      std::vector<std::uint16_t> row(static_cast<std::size_t>(cols));
      std::vector<float> values(static_cast<std::size_t>(cols));
      for (std::int64_t r = 0; r < rows; ++r) {
        unpack_bf16_row(view, r, row);
        ASSERT_TRUE(std::equal(row.begin(), row.end(), w.half.begin() + r * cols));
        dequantize_packed_row(view, r, values);
        for (std::int64_t c = 0; c < cols; ++c) {
          ASSERT_EQ(values[static_cast<std::size_t>(c)],
                    w.exact[static_cast<std::size_t>(r * cols + c)]);
        }
      }
      const std::vector<std::int32_t> picked = {static_cast<std::int32_t>(rows - 1), 0};
      const std::vector<std::byte> sel = select_packed_rows(view, picked);
      const PackedView sel_view{WeightFormat::kBF16, sel.data(), 2, cols};
      unpack_bf16_row(sel_view, 0, row);
      ASSERT_TRUE(std::equal(row.begin(), row.end(), w.half.begin() + (rows - 1) * cols));
      if (cols >= 3) {
        const std::vector<std::byte> part = select_packed_cols(view, 1, cols - 1);
        const PackedView part_view{WeightFormat::kBF16, part.data(), rows, cols - 2};
        std::vector<std::uint16_t> part_row(static_cast<std::size_t>(cols - 2));
        unpack_bf16_row(part_view, rows - 1, part_row);
        ASSERT_TRUE(
            std::equal(part_row.begin(), part_row.end(), w.half.begin() + (rows - 1) * cols + 1));
      }
    }
  }
}

}  // namespace
}  // namespace selfspec::kernels::cpu::test
