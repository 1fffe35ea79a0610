// GgufFile and GgufWriter: what the writer writes reads back exactly (every value type, arrays,
// tensors, alignment), and every malformed file — built byte by byte — is refused with an error
// naming the key or tensor, never a crash: every truncation of a valid file, bad magic and
// version, counts and lengths beyond the file, unknown value and tensor types, duplicates,
// misaligned, out-of-file and overlapping tensors.
#include "model_io/gguf_file.hpp"
#include "core/error.hpp"
#include "model_io/gguf_writer.hpp"
#include "tests/support/temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace selfspec {
namespace {

using ::testing::HasSubstr;

// Builds GGUF bytes field by field, to write files the writer never would.
class RawGguf {
 public:
  RawGguf& magic(std::string_view m = "GGUF") {
    for (char c : m) bytes_.push_back(static_cast<std::byte>(c));
    return *this;
  }
  template <typename T>
  RawGguf& scalar(T value) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
    return *this;
  }
  RawGguf& u32(std::uint32_t v) { return scalar(v); }
  RawGguf& u64(std::uint64_t v) { return scalar(v); }
  RawGguf& string(std::string_view s) {
    u64(s.size());
    for (char c : s) bytes_.push_back(static_cast<std::byte>(c));
    return *this;
  }
  // Header: magic, version, tensor count, metadata count.
  RawGguf& header(std::uint64_t tensors, std::uint64_t keys, std::uint32_t version = 3) {
    return magic().u32(version).u64(tensors).u64(keys);
  }
  RawGguf& key_u32(std::string_view key, std::uint32_t value) {
    return string(key).u32(static_cast<std::uint32_t>(GgufValueType::kUint32)).u32(value);
  }
  // A tensor info: name, dims, type, offset.
  RawGguf& tensor(std::string_view name, std::vector<std::uint64_t> dims, std::uint32_t type,
                  std::uint64_t offset) {
    string(name).u32(static_cast<std::uint32_t>(dims.size()));
    for (std::uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  RawGguf& pad(std::size_t alignment = 32) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(std::byte{0});
    return *this;
  }
  RawGguf& zeros(std::size_t n) {
    bytes_.insert(bytes_.end(), n, std::byte{0});
    return *this;
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

std::string parse_error(const std::vector<std::byte>& bytes) {
  try {
    const GgufFile file(bytes, "test.gguf");
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

GgufWriter sample_writer() {
  GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  writer.set_u32("llama.block_count", 2);
  writer.set_i32("signed", -5);
  writer.set_f32("eps", 1e-5F);
  writer.set_bool("flag", true);
  writer.set("u8", GgufValue{GgufValueType::kUint8, {}, std::int64_t{200}});
  writer.set("i64", GgufValue{GgufValueType::kInt64, {}, std::int64_t{-(1LL << 40)}});
  writer.set("f64", GgufValue{GgufValueType::kFloat64, {}, 0.1});
  writer.set_string_array("tokens", {"a", "", "héllo", std::string("\0z", 2)});
  writer.set_int_array("types", {1, 3, 6}, GgufValueType::kUint8);
  writer.set_f32_array("scores", {0.5, -1.25});
  const std::vector<float> matrix = {1, 2, 3, 4, 5, 6};
  writer.add_f32_tensor("w", {3, 2}, matrix);
  const std::vector<float> vector = {7, 8, 9};
  writer.add_f32_tensor("v", {3}, vector, GgmlType::kF16);
  return writer;
}

TEST(GgufFile, ReadsBackWhatTheWriterWrote) {
  const std::vector<std::byte> bytes = sample_writer().to_bytes();
  const GgufFile file(bytes, "sample.gguf");
  EXPECT_EQ(file.version(), 3U);
  EXPECT_EQ(file.alignment(), 32U);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_int("llama.block_count"), 2);
  EXPECT_EQ(file.get_int("signed"), -5);
  EXPECT_FLOAT_EQ(static_cast<float>(file.get_float("eps")), 1e-5F);
  EXPECT_TRUE(file.get_bool("flag"));
  EXPECT_EQ(file.get_int("u8"), 200);
  EXPECT_EQ(file.get_int("i64"), -(1LL << 40));
  EXPECT_DOUBLE_EQ(file.get_float("f64"), 0.1);
  EXPECT_EQ(file.get_float("llama.block_count"), 2.0);  // integers read as numbers
  EXPECT_EQ(file.get_string_array("tokens"),
            (std::vector<std::string>{"a", "", "héllo", std::string("\0z", 2)}));
  EXPECT_EQ(file.get_int_array("types"), (std::vector<std::int64_t>{1, 3, 6}));
  EXPECT_EQ(file.get_float_array("scores"), (std::vector<double>{0.5, -1.25}));
  EXPECT_EQ(file.get_float_array("types"), (std::vector<double>{1, 3, 6}));
  EXPECT_FALSE(file.find_string("missing").has_value());

  ASSERT_EQ(file.tensors().size(), 2U);
  const GgufTensorInfo& w = file.tensor("w");
  EXPECT_EQ(w.dims, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(w.rows(), 2);
  EXPECT_EQ(w.cols(), 3);
  EXPECT_EQ(w.offset % 32, 0U);
  std::vector<float> row(3);
  std::memcpy(row.data(), file.row_bytes(w, 1).data(), 12);
  EXPECT_EQ(row, (std::vector<float>{4, 5, 6}));
  const GgufTensorInfo& v = file.tensor("v");
  EXPECT_EQ(v.type, GgmlType::kF16);
  EXPECT_EQ(v.nbytes, 6U);
  std::vector<float> values(3);
  dequantize_ggml(v.type, file.row_bytes(v, 0), values);
  EXPECT_EQ(values, (std::vector<float>{7, 8, 9}));
}

TEST(GgufFile, WrongTypesAndMissingKeysNameTheKey) {
  const std::vector<std::byte> bytes = sample_writer().to_bytes();
  const GgufFile file(bytes, "sample.gguf");
  EXPECT_THAT([&] { file.get_int("general.architecture"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("'general.architecture' is a string")));
  EXPECT_THAT([&] { file.get_string("nope"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("metadata key 'nope' is missing")));
  EXPECT_THAT([&] { file.get_string_array("types"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("'types' is not an array of strings")));
  EXPECT_THAT([&] { file.get_bool("u8"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("'u8' is a u8, not a bool")));
  EXPECT_THAT([&] { file.tensor("x"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tensor 'x' is missing from sample.gguf")));
}

TEST(GgufFile, HonoursAnotherAlignmentAndVersionTwo) {
  GgufWriter writer(64);
  const std::vector<float> a = {1, 2};
  writer.add_f32_tensor("a", {2}, a);
  writer.add_f32_tensor("b", {2}, a);
  const std::vector<std::byte> bytes = writer.to_bytes();
  const GgufFile file(bytes, "aligned.gguf");
  EXPECT_EQ(file.alignment(), 64U);
  EXPECT_EQ(file.tensor("a").offset % 64, 0U);
  EXPECT_EQ(file.tensor("b").offset - file.tensor("a").offset, 64U);

  std::vector<std::byte> v2 = bytes;
  v2[4] = std::byte{2};
  EXPECT_EQ(GgufFile(v2, "v2.gguf").version(), 2U);
}

TEST(GgufFile, EveryTruncationIsAnError) {
  const std::vector<std::byte> bytes = sample_writer().to_bytes();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    // Only the trailing padding after the last tensor may go without changing the meaning.
    const std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + static_cast<long>(n));
    const std::string message = parse_error(prefix);
    if (message == "(no error)") {
      const GgufFile file(prefix, "t");
      const GgufTensorInfo& last = file.tensors().back();
      EXPECT_LE(last.offset + last.nbytes, n) << "prefix of " << n << " bytes";
      continue;
    }
    EXPECT_THAT(message, HasSubstr("test.gguf")) << "prefix of " << n << " bytes";
  }
}

TEST(GgufFile, RefusesBadHeaders) {
  EXPECT_THAT(parse_error(RawGguf().magic("GGUX").u32(3).u64(0).u64(0).bytes()),
              HasSubstr("not a GGUF file"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 0, 1).bytes()),
              HasSubstr("GGUF version 1 is not supported"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 0, 4).bytes()), HasSubstr("version 4"));
  EXPECT_THAT(parse_error(RawGguf().header(std::numeric_limits<std::uint64_t>::max(), 0).bytes()),
              HasSubstr("tensors, more than the limit"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1000).bytes()),
              HasSubstr("claims 1000 items, more than the"));
  EXPECT_THAT(parse_error(RawGguf().header(5, 0).zeros(20).bytes()),
              HasSubstr("the tensor count claims 5 items"));
}

TEST(GgufFile, RefusesBadMetadata) {
  // A string longer than the file.
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).string("k").u32(8).u64(1000).zeros(8).bytes()),
              HasSubstr("truncated: k needs 1000 bytes"));
  // A string longer than the limit.
  EXPECT_THAT(
      parse_error(RawGguf().header(0, 1).string("k").u32(8).u64(kMaxGgufStringBytes + 1).bytes()),
      HasSubstr("more than the limit"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).string("k").u32(13).u32(0).bytes()),
              HasSubstr("metadata key 'k' has unknown value type 13"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 2).key_u32("k", 1).key_u32("k", 2).bytes()),
              HasSubstr("metadata key 'k' appears twice"));
  EXPECT_THAT(
      parse_error(RawGguf().header(0, 1).string("b").u32(7).scalar<std::uint8_t>(2).bytes()),
      HasSubstr("'b' is a bool with value 2"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).string("big").u32(10).u64(~0ULL).bytes()),
              HasSubstr("'big' is a u64 of 18446744073709551615"));
  // Arrays: of arrays, too many elements, more elements than bytes left.
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).string("a").u32(9).u32(9).u64(0).bytes()),
              HasSubstr("array of arrays"));
  EXPECT_THAT(
      parse_error(
          RawGguf().header(0, 1).string("a").u32(9).u32(4).u64(kMaxGgufArrayCount + 1).bytes()),
      HasSubstr("more than the limit"));
  EXPECT_THAT(
      parse_error(
          RawGguf().header(0, 1).string("a").u32(9).u32(8).u64(1'000'000).zeros(64).bytes()),
      HasSubstr("metadata key 'a' claims 1000000 items"));
  // general.alignment must be a power of two.
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key_u32("general.alignment", 24).bytes()),
              HasSubstr("general.alignment is 24, not a power of two"));
  EXPECT_THAT(parse_error(RawGguf().header(0, 1).key_u32("general.alignment", 0).bytes()),
              HasSubstr("general.alignment is 0"));
}

// One F32 tensor `t` of `dims`, type and offset as given, with `data` bytes of data.
std::vector<std::byte> one_tensor(std::vector<std::uint64_t> dims, std::uint32_t type,
                                  std::uint64_t offset, std::size_t data) {
  return RawGguf()
      .header(1, 0)
      .tensor("t", std::move(dims), type, offset)
      .pad()
      .zeros(data)
      .bytes();
}

TEST(GgufFile, RefusesBadTensorInfos) {
  EXPECT_THAT(parse_error(one_tensor({}, 0, 0, 64)), HasSubstr("tensor 't' has 0 dimensions"));
  EXPECT_THAT(parse_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 64)), HasSubstr("has 5 dimensions"));
  EXPECT_THAT(parse_error(one_tensor({4, 0}, 0, 0, 64)), HasSubstr("dimension 1 of size 0"));
  EXPECT_THAT(parse_error(one_tensor({1ULL << 40, 1ULL << 20}, 0, 0, 64)),
              HasSubstr("dimension 1 of size 1048576"));
  EXPECT_THAT(parse_error(one_tensor({256}, 16, 0, 256)),
              HasSubstr("tensor 't' [256] has type IQ2_XXS, which selfspec cannot dequantize "
                        "(supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, "
                        "Q4_K, Q5_K, Q6_K)"));
  EXPECT_THAT(parse_error(one_tensor({16}, 1000, 0, 256)), HasSubstr("has type type 1000"));
  EXPECT_THAT(parse_error(one_tensor({48}, 8, 0, 256)),
              HasSubstr("not a whole number of 32-element blocks"));
  EXPECT_THAT(parse_error(one_tensor({4}, 0, 8, 64)),
              HasSubstr("starts at data offset 8, not a multiple of the alignment 32"));
  EXPECT_THAT(parse_error(one_tensor({64}, 0, 0, 100)),
              HasSubstr("tensor 't' (256 bytes at data offset 0) runs past the end"));
  EXPECT_THAT(parse_error(one_tensor({4}, 0, 1ULL << 62, 64)), HasSubstr("runs past the end"));
  const auto two = [](std::string_view second, std::uint64_t offset) {
    return RawGguf()
        .header(2, 0)
        .tensor("a", {16}, 0, 0)
        .tensor(second, {16}, 0, offset)
        .pad()
        .zeros(256)
        .bytes();
  };
  EXPECT_THAT(parse_error(two("a", 64)), HasSubstr("tensor 'a' appears twice"));
  EXPECT_THAT(parse_error(two("b", 32)), HasSubstr("tensors 'a' and 'b' overlap"));
  EXPECT_EQ(parse_error(two("b", 64)), "(no error)");
}

TEST(GgufFile, OpensFilesAndRecognisesTheMagic) {
  const testing::TempDir dir("gguf-file");
  sample_writer().write(dir / "m.gguf");
  EXPECT_TRUE(is_gguf_file(dir / "m.gguf"));
  EXPECT_FALSE(is_gguf_file(dir.path()));
  EXPECT_FALSE(is_gguf_file(dir / "absent.gguf"));
  const GgufFile file(dir / "m.gguf");
  EXPECT_EQ(file.get_int("llama.block_count"), 2);
  EXPECT_THAT(file.source(), HasSubstr("m.gguf"));
}

}  // namespace
}  // namespace selfspec
