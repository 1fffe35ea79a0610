// ggml dequantization: both paths against gguf-py's vectors (tests/data/ggml/quant_vectors.json,
// written by scripts/dev/make_ggml_quant_vectors.py) bit for bit, the fast path against the
// reference on random blocks, and the type table (names, block geometry, byte counts, errors).
#include "kernels/cpu/ggml_dequantize.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace selfspec {
namespace {

using ::testing::HasSubstr;

// Written out (not kSupportedGgmlTypes) so the test states the contract on its own.
constexpr GgmlType kSupported[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1,
    GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
constexpr GgmlType kBlockTypes[] = {
    GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
    GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

const std::filesystem::path kVectors =
    std::filesystem::path(SELFSPEC_SOURCE_DIR) / "tests/data/ggml/quant_vectors.json";

nlohmann::json load_vectors() {
  std::ifstream in(kVectors);
  if (!in) throw std::runtime_error("cannot open " + kVectors.string());
  return nlohmann::json::parse(in);
}

std::vector<std::byte> from_hex(const std::string& hex) {
  std::vector<std::byte> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::byte>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

std::vector<float> floats_from_bytes(const std::vector<std::byte>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// Index of the first element whose bits differ, or -1.
std::int64_t first_difference(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) {
      return static_cast<std::int64_t>(i);
    }
  }
  return -1;
}

// NaN-filled output, so an element a path forgets to write shows up.
std::vector<float> poisoned(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

TEST(GgmlDequantize, MatchesGgufPyVectorsBitForBit) {
  const nlohmann::json doc = load_vectors();
  ASSERT_EQ(doc.at("types").size(), std::size(kSupported));
  for (const nlohmann::json& entry : doc.at("types")) {
    const auto type = ggml_type_from_id(entry.at("id").get<std::uint32_t>());
    ASSERT_TRUE(type.has_value()) << entry.at("name");
    EXPECT_EQ(ggml_type_name(*type), entry.at("name").get<std::string>());
    EXPECT_EQ(ggml_block_elements(*type), entry.at("block_elements").get<std::int64_t>());
    EXPECT_EQ(ggml_block_bytes(*type), entry.at("block_bytes").get<std::int64_t>());
    for (const nlohmann::json& c : entry.at("cases")) {
      SCOPED_TRACE(entry.at("name").get<std::string>() + " " + c.at("name").get<std::string>());
      const std::vector<std::byte> src = from_hex(c.at("data").get<std::string>());
      const std::vector<float> expected =
          floats_from_bytes(from_hex(c.at("expected_f32").get<std::string>()));
      const auto n = c.at("n").get<std::size_t>();
      ASSERT_EQ(expected.size(), n);
      std::vector<float> fast = poisoned(n);
      std::vector<float> reference = poisoned(n);
      dequantize_ggml(*type, src, fast);
      dequantize_ggml_reference(*type, src, reference);
      EXPECT_EQ(first_difference(fast, expected), -1) << "fast path";
      EXPECT_EQ(first_difference(reference, expected), -1) << "reference";
    }
  }
}

// Byte offsets of the f16 scale fields in one block (ggml-common.h).
std::vector<std::size_t> scale_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
      return {0};
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return {0, 2};
    case GgmlType::kQ2_K:
      return {80, 82};
    case GgmlType::kQ3_K:
      return {108};
    case GgmlType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

// Random blocks; f16 scale fields get finite values (normal, subnormal or zero, either sign), so
// no NaN arises from arithmetic. F32/F16/BF16 data is random bits, NaNs included (copied or
// converted, never computed with).
std::vector<std::byte> random_blocks(GgmlType type, std::int64_t n_blocks, std::mt19937& rng) {
  const auto block_bytes = static_cast<std::size_t>(ggml_block_bytes(type));
  std::vector<std::byte> data(block_bytes * static_cast<std::size_t>(n_blocks));
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::byte& b : data) b = static_cast<std::byte>(byte(rng));
  std::uniform_real_distribution<float> exponent(-26.0f, 10.0f);
  for (std::size_t block = 0; block < static_cast<std::size_t>(n_blocks); ++block) {
    for (const std::size_t offset : scale_offsets(type)) {
      const float magnitude = rng() % 16 == 0 ? 0.0f : std::exp2(exponent(rng));
      const std::uint16_t bits = f32_to_f16(rng() % 2 == 0 ? magnitude : -magnitude);
      std::memcpy(data.data() + block * block_bytes + offset, &bits, sizeof bits);
    }
  }
  return data;
}

TEST(GgmlDequantize, FastEqualsReferenceOnRandomBlocks) {
  std::mt19937 rng(2024);
  for (const GgmlType type : kSupported) {
    for (const std::int64_t n_blocks : {1, 2, 7, 64}) {
      SCOPED_TRACE(std::string(ggml_type_name(type)) + " blocks " + std::to_string(n_blocks));
      const std::vector<std::byte> data = random_blocks(type, n_blocks, rng);
      const auto n = static_cast<std::size_t>(n_blocks * ggml_block_elements(type));
      // Unaligned source and destination (rows of a GGUF tensor start anywhere).
      std::vector<std::byte> src_buffer(data.size() + 3);
      std::memcpy(src_buffer.data() + 3, data.data(), data.size());
      const std::span<const std::byte> src(src_buffer.data() + 3, data.size());
      std::vector<float> fast = poisoned(n + 1);
      std::vector<float> reference = poisoned(n);
      dequantize_ggml(type, src, std::span(fast).subspan(1));
      dequantize_ggml_reference(type, data, reference);
      EXPECT_EQ(first_difference(std::span(fast).subspan(1), reference), -1);
      EXPECT_TRUE(std::isnan(fast[0])) << "wrote before its destination";
    }
  }
}

// A few Q2_K / Q3_K elements worked out by hand from the block layouts (ggml-common.h), so the
// bit positions are pinned down independently of gguf-py.
TEST(GgmlDequantize, Q2KAndQ3KLayoutsByHand) {
  const auto put_u16 = [](std::vector<std::byte>& block, std::size_t at, std::uint16_t v) {
    std::memcpy(block.data() + at, &v, sizeof v);
  };
  // Q2_K {scales[16], qs[64], d, dmin}: d = 1, dmin = 0.5; sub-block 5 (elements 80..95: half 0,
  // quarter 2, second 16) has scale 3 and min 2; element 81 is bits 4..5 of qs[17] = 2.
  std::vector<std::byte> q2(84);
  put_u16(q2, 80, 0x3C00);
  put_u16(q2, 82, 0x3800);
  q2[5] = std::byte{0x23};
  q2[16 + 17] = std::byte{0b0010'0000};
  // Q3_K {hmask[32], qs[64], scales[12], d}: d = 2; every scale is -32 except sub-block 13
  // (elements 208..223: half 1, quarter 2), whose 6 bits are 7 (high nibble of scales[5]) | 2 << 4
  // (bits 6..7 of scales[9]) = 39, so 7. Elements 210, 211: bits 4..5 of qs[32 + 18] = 3 and of
  // qs[32 + 19] = 1, and bit 6 of hmask[18] clear (-4), of hmask[19] set.
  std::vector<std::byte> q3(110);
  put_u16(q3, 108, 0x4000);
  q3[96 + 5] = std::byte{0x70};
  q3[96 + 9] = std::byte{0x80};
  q3[32 + 50] = std::byte{0b0011'0000};
  q3[32 + 51] = std::byte{0b0001'0000};
  q3[19] = std::byte{0x40};
  for (const bool fast : {true, false}) {
    SCOPED_TRACE(fast ? "fast" : "reference");
    std::vector<float> y2 = poisoned(256);
    std::vector<float> y3 = poisoned(256);
    (fast ? dequantize_ggml : dequantize_ggml_reference)(GgmlType::kQ2_K, q2, y2);
    (fast ? dequantize_ggml : dequantize_ggml_reference)(GgmlType::kQ3_K, q3, y3);
    EXPECT_EQ(y2[79], 0.0f);
    EXPECT_EQ(y2[80], -1.0f);  // 1 * 3 * 0 - 0.5 * 2
    EXPECT_EQ(y2[81], 5.0f);   // 1 * 3 * 2 - 0.5 * 2
    EXPECT_EQ(y3[0], 256.0f);  // 2 * -32 * (0 - 4)
    EXPECT_EQ(y3[208], -56.0f);
    EXPECT_EQ(y3[210], -14.0f);  // 2 * 7 * (3 - 4)
    EXPECT_EQ(y3[211], 14.0f);   // 2 * 7 * 1
  }
}

TEST(GgmlDequantize, F16EveryBitPattern) {
  std::vector<std::byte> src(2 * 65536);
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto bits = static_cast<std::uint16_t>(i);
    std::memcpy(src.data() + 2 * i, &bits, sizeof bits);
  }
  std::vector<float> fast = poisoned(65536);
  std::vector<float> reference = poisoned(65536);
  dequantize_ggml(GgmlType::kF16, src, fast);
  dequantize_ggml_reference(GgmlType::kF16, src, reference);
  EXPECT_EQ(first_difference(fast, reference), -1);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(reference[0x0001]),
            std::bit_cast<std::uint32_t>(0x1p-24f));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(reference[0x8000]), 0x80000000u);
}

TEST(GgmlDequantize, EmptyInputIsNoOp) {
  for (const GgmlType type : kSupported) {
    EXPECT_NO_THROW(dequantize_ggml(type, {}, {}));
    EXPECT_NO_THROW(dequantize_ggml_reference(type, {}, {}));
  }
}

TEST(GgmlDequantize, RejectsWrongByteCount) {
  for (const GgmlType type : kSupported) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    const auto n = static_cast<std::size_t>(2 * ggml_block_elements(type));
    const auto bytes = static_cast<std::size_t>(2 * ggml_block_bytes(type));
    std::vector<float> dst(n);
    for (const std::size_t wrong : {bytes - 1, bytes + 1, std::size_t{0}}) {
      const std::vector<std::byte> src(wrong);
      try {
        dequantize_ggml(type, src, dst);
        ADD_FAILURE() << "accepted " << wrong << " bytes";
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr(std::string(ggml_type_name(type))));
        EXPECT_THAT(e.what(), HasSubstr(std::to_string(bytes) + " bytes"));
      }
      EXPECT_THROW(dequantize_ggml_reference(type, src, dst), Error);
    }
  }
}

TEST(GgmlDequantize, RejectsPartialBlocks) {
  for (const GgmlType type : kBlockTypes) {
    const std::int64_t block = ggml_block_elements(type);
    const std::vector<std::byte> src(static_cast<std::size_t>(ggml_block_bytes(type)));
    std::vector<float> dst(static_cast<std::size_t>(block + 1));
    EXPECT_THROW(dequantize_ggml(type, src, dst), Error);
    EXPECT_THROW(dequantize_ggml_reference(type, src, dst), Error);
    EXPECT_THROW(ggml_row_bytes(type, block - 1), Error);
    EXPECT_THROW(ggml_row_bytes(type, 3 * block / 2), Error);
  }
}

TEST(GgmlTypes, RowBytes) {
  EXPECT_EQ(ggml_row_bytes(GgmlType::kF32, 3), 12u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kF16, 5), 10u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kBF16, 7), 14u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ4_0, 64), 36u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ4_1, 576), 18u * 20u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ5_0, 96), 3u * 22u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ5_1, 896), 28u * 24u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ8_0, 32), 34u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ2_K, 768), 3u * 84u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ3_K, 2560), 10u * 110u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ4_K, 1536), 6u * 144u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ5_K, 4864), 19u * 176u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ6_K, 256), 210u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ4_K, 0), 0u);
  try {
    ggml_row_bytes(GgmlType::kQ4_K, 100);
    ADD_FAILURE() << "accepted 100 elements of Q4_K";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("Q4_K"));
    EXPECT_THAT(e.what(), HasSubstr("100"));
    EXPECT_THAT(e.what(), HasSubstr("256"));
  }
  EXPECT_THROW(ggml_row_bytes(GgmlType::kF32, -1), Error);
  EXPECT_THROW(ggml_row_bytes(GgmlType::kF32, std::numeric_limits<std::int64_t>::max()), Error);
  EXPECT_THROW(ggml_block_bytes(static_cast<GgmlType>(9)), Error);  // Q8_1
}

TEST(GgmlTypes, FromIdAcceptsExactlyTheSupportedTypes) {
  for (std::uint32_t id = 0; id < 256; ++id) {
    const auto type = ggml_type_from_id(id);
    const bool supported = std::find(std::begin(kSupported), std::end(kSupported),
                                     static_cast<GgmlType>(id)) != std::end(kSupported);
    EXPECT_EQ(type.has_value(), supported) << "id " << id;
    if (type) {
      EXPECT_EQ(static_cast<std::uint32_t>(*type), id);
    }
  }
  EXPECT_FALSE(ggml_type_from_id(std::numeric_limits<std::uint32_t>::max()).has_value());
  // The list the header publishes (error messages print it) is the same set.
  EXPECT_THAT(kSupportedGgmlTypes, ::testing::UnorderedElementsAreArray(kSupported));
}

TEST(GgmlTypes, NamesMatchGgufPy) {
  const nlohmann::json doc = load_vectors();
  ASSERT_GE(doc.at("type_names").size(), 30u);
  for (const auto& [id, name] : doc.at("type_names").items()) {
    EXPECT_EQ(ggml_type_name(static_cast<std::uint32_t>(std::stoul(id))), name.get<std::string>());
  }
  // Ids removed from ggml still have their names; unknown ids are numbered, and stay valid.
  EXPECT_EQ(ggml_type_name(31), "Q4_0_4_4");
  EXPECT_EQ(ggml_type_name(GgmlType::kQ6_K), "Q6_K");
  const std::string_view unknown = ggml_type_name(1000);
  EXPECT_EQ(unknown, "type 1000");
  EXPECT_EQ(ggml_type_name(4294967295u), "type 4294967295");
  EXPECT_EQ(ggml_type_name(1000).data(), unknown.data());
}

}  // namespace
}  // namespace selfspec
