// SafetensorsWriter -> SafetensorsFile/Checkpoint round trips: bytes, dtype-converting slices,
// sharded checkpoints with an index, metadata, and the writer's own error handling.
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/safetensors_writer.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/model_io/raw_safetensors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace selfspec {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

constexpr DType kAllDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

std::vector<std::byte> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xffu);
  return out;
}

// Finite values of moderate size in the given storage dtype (so conversions are meaningful).
std::vector<std::byte> random_values(DType dtype, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<std::byte> out(n * dtype_size(dtype));
  for (std::size_t i = 0; i < n; ++i) store_from_f32(dtype, out.data(), i, dist(rng));
  return out;
}

SafetensorsWriter::FillFn copy_of(const std::vector<std::byte>& bytes) {
  return [&bytes](std::span<std::byte> out) {
    ASSERT_EQ(out.size(), bytes.size());
    std::memcpy(out.data(), bytes.data(), bytes.size());
  };
}

std::vector<std::byte> mapped_bytes(const Checkpoint& checkpoint, const std::string& name) {
  const TensorInfo& info = checkpoint.tensor(name);
  const SafetensorsFile file(checkpoint.file_of(info));
  const auto* begin = file.mapping().bytes().data() + info.data_offset;
  return {begin, begin + info.nbytes};
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> directory_listing(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(SafetensorsRoundTrip, AllDTypesAreByteIdentical) {
  TempDir dir;
  // Random bytes include NaNs, infinities and subnormals: a same-dtype read must keep every bit.
  const auto f32 = random_bytes(4 * 6 * 5, 1);
  const auto bf16 = random_bytes(2 * 7 * 3, 2);
  const auto f16 = random_bytes(2 * 11, 3);
  const auto scalar = random_bytes(4, 4);
  SafetensorsWriter writer;
  writer.add("model.f32", DType::kF32, {6, 5}, copy_of(f32));
  writer.add("model.bf16", DType::kBF16, {7, 3}, copy_of(bf16));
  writer.add("model.f16", DType::kF16, {11}, copy_of(f16));
  writer.add("model.scalar", DType::kF32, {}, copy_of(scalar));
  const auto written = writer.write(dir.path());
  ASSERT_THAT(written, ElementsAre(dir / "model.safetensors"));
  EXPECT_THAT(directory_listing(dir.path()), ElementsAre("model.safetensors"));

  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.file_count(), 1u);
  EXPECT_EQ(checkpoint.directory(), dir.path());
  EXPECT_THAT(checkpoint.tensor_names(),
              ElementsAre("model.bf16", "model.f16", "model.f32", "model.scalar"));
  EXPECT_EQ(checkpoint.total_bytes(), f32.size() + bf16.size() + f16.size() + scalar.size());

  const std::pair<const char*, const std::vector<std::byte>*> expected[] = {
      {"model.f32", &f32}, {"model.bf16", &bf16}, {"model.f16", &f16}, {"model.scalar", &scalar}};
  for (const auto& [name, bytes] : expected) {
    SCOPED_TRACE(name);
    const TensorInfo& info = checkpoint.tensor(name);
    EXPECT_EQ(info.nbytes, bytes->size());
    EXPECT_EQ(mapped_bytes(checkpoint, name), *bytes);
    std::vector<std::byte> out(bytes->size());
    checkpoint.read_all(info, info.dtype, out.data());
    EXPECT_EQ(out, *bytes);
  }
  EXPECT_EQ(checkpoint.tensor("model.f32").dtype, DType::kF32);
  EXPECT_EQ(checkpoint.tensor("model.bf16").dtype, DType::kBF16);
  EXPECT_EQ(checkpoint.tensor("model.f16").dtype, DType::kF16);
  EXPECT_THAT(checkpoint.tensor("model.f32").shape, ElementsAre(6, 5));
  EXPECT_TRUE(checkpoint.tensor("model.scalar").shape.empty());
  EXPECT_EQ(checkpoint.tensor("model.scalar").numel(), 1);
}

TEST(SafetensorsRoundTrip, HeaderIsPaddedAndDataFollowsInInsertionOrder) {
  TempDir dir;
  std::vector<std::string> fill_order;
  SafetensorsWriter writer;
  for (const char* name : {"zeta", "alpha", "mid"}) {
    writer.add(name, DType::kBF16, {3}, [&fill_order, name](std::span<std::byte> out) {
      fill_order.emplace_back(name);
      std::memset(out.data(), 0x11, out.size());
    });
  }
  writer.write(dir.path());
  EXPECT_THAT(fill_order, ElementsAre("zeta", "alpha", "mid"));

  const std::string raw = read_text(dir / "model.safetensors");
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(raw[i]);
  EXPECT_EQ(header_len % 8, 0u);
  EXPECT_EQ(raw.size(), 8 + header_len + 3 * 6);
  const auto header = nlohmann::json::parse(raw.substr(8, header_len));
  EXPECT_EQ(header["zeta"]["data_offsets"], nlohmann::json::array({0, 6}));
  EXPECT_EQ(header["alpha"]["data_offsets"], nlohmann::json::array({6, 12}));
  EXPECT_EQ(header["mid"]["data_offsets"], nlohmann::json::array({12, 18}));
  EXPECT_EQ(header["mid"]["dtype"], "BF16");
  EXPECT_FALSE(header.contains("__metadata__"));
}

TEST(SafetensorsRoundTrip, MetadataIsKept) {
  TempDir dir;
  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  writer.set_metadata("note", "written by a test");
  writer.set_metadata("format", "pt");  // setting again replaces
  writer.add("w", DType::kF32, {2},
             [](std::span<std::byte> out) { std::memset(out.data(), 0, out.size()); });
  writer.write(dir.path());
  const SafetensorsFile file(dir / "model.safetensors");
  EXPECT_EQ(file.metadata().size(), 2u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "written by a test");
  ASSERT_EQ(file.tensors().size(), 1u);
  EXPECT_EQ(file.tensors()[0].name, "w");
  EXPECT_EQ(file.path(), dir / "model.safetensors");
}

TEST(SafetensorsRoundTrip, ZeroSizeTensorsAreLegal) {
  TempDir dir;
  int empty_fills = 0;
  const auto data = random_bytes(8, 5);
  SafetensorsWriter writer;
  writer.add("empty.first", DType::kF32, {0, 4}, [&](std::span<std::byte> out) {
    EXPECT_TRUE(out.empty());
    ++empty_fills;
  });
  writer.add("data", DType::kF16, {4}, copy_of(data));
  writer.add("empty.last", DType::kBF16, {3, 0}, [&](std::span<std::byte> out) {
    EXPECT_TRUE(out.empty());
    ++empty_fills;
  });
  writer.write(dir.path());
  EXPECT_EQ(empty_fills, 2);
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.tensor("empty.first").nbytes, 0u);
  EXPECT_EQ(checkpoint.tensor("empty.last").numel(), 0);
  EXPECT_EQ(mapped_bytes(checkpoint, "data"), data);
  checkpoint.read_all(checkpoint.tensor("empty.last"), DType::kF32, nullptr);
  checkpoint.read(checkpoint.tensor("empty.first"), {0, 0, 0, 4}, DType::kF32, nullptr);
}

TEST(SafetensorsRoundTrip, EmptyCheckpointRoundTrips) {
  TempDir dir;
  SafetensorsWriter writer;
  writer.write(dir.path());
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_TRUE(checkpoint.tensor_names().empty());
  EXPECT_EQ(checkpoint.total_bytes(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Slices with dtype conversion
// ---------------------------------------------------------------------------------------------

struct SliceCase {
  const char* label;
  TensorSlice slice;
};

class SafetensorsSlices : public ::testing::TestWithParam<std::tuple<DType, DType>> {};

TEST_P(SafetensorsSlices, MatchElementwiseConversion) {
  const auto [src_dtype, dst_dtype] = GetParam();
  constexpr std::int64_t kRows = 7;
  constexpr std::int64_t kCols = 9;
  const auto matrix = random_values(src_dtype, kRows * kCols, 11);
  const auto vector = random_values(src_dtype, 13, 12);
  TempDir dir;
  SafetensorsWriter writer;
  writer.add("before", DType::kF32, {5},
             [](std::span<std::byte> out) { std::memset(out.data(), 0xff, out.size()); });
  writer.add("matrix", src_dtype, {kRows, kCols}, copy_of(matrix));
  writer.add("vector", src_dtype, {13}, copy_of(vector));
  writer.write(dir.path());
  const Checkpoint checkpoint = Checkpoint::open(dir.path());

  const std::size_t dst_size = dtype_size(dst_dtype);
  // The reference: element (r, c) of the source converted on its own.
  auto expected_element = [&](const std::vector<std::byte>& src, std::size_t index) {
    std::vector<std::byte> one(dst_size);
    convert_dtype(src_dtype, src.data() + index * dtype_size(src_dtype), dst_dtype, one.data(), 1);
    return one;
  };

  const SliceCase cases[] = {
      {"all", {0, kRows, 0, kCols}},       {"row range", {2, 5, 0, kCols}},
      {"column range", {0, kRows, 3, 7}},  {"rows and columns", {1, 6, 2, 8}},
      {"single element", {6, 7, 8, 9}},    {"empty rows", {4, 4, 0, kCols}},
      {"empty columns", {0, kRows, 5, 5}},
  };
  for (const SliceCase& c : cases) {
    SCOPED_TRACE(c.label);
    const std::int64_t rows = c.slice.row_end - c.slice.row_begin;
    const std::int64_t cols = c.slice.col_end - c.slice.col_begin;
    // One guard element after the slice catches writes past its end.
    std::vector<std::byte> out(static_cast<std::size_t>(rows * cols + 1) * dst_size,
                               std::byte{0x5a});
    checkpoint.read(checkpoint.tensor("matrix"), c.slice, dst_dtype, out.data());
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t col = 0; col < cols; ++col) {
        const auto src_index =
            static_cast<std::size_t>((c.slice.row_begin + r) * kCols + c.slice.col_begin + col);
        const auto expected = expected_element(matrix, src_index);
        const auto* got = out.data() + static_cast<std::size_t>(r * cols + col) * dst_size;
        ASSERT_EQ(std::memcmp(got, expected.data(), dst_size), 0) << "at " << r << ", " << col;
      }
    }
    for (std::size_t i = out.size() - dst_size; i < out.size(); ++i) {
      ASSERT_EQ(out[i], std::byte{0x5a}) << "wrote past the slice";
    }
  }

  // 1-D: the row range selects elements; the column range is ignored.
  std::vector<std::byte> out(5 * dst_size);
  checkpoint.read(checkpoint.tensor("vector"), {4, 9, 123, -7}, dst_dtype, out.data());
  for (std::size_t i = 0; i < 5; ++i) {
    const auto expected = expected_element(vector, 4 + i);
    ASSERT_EQ(std::memcmp(out.data() + i * dst_size, expected.data(), dst_size), 0) << i;
  }

  // read_all converts the whole tensor.
  std::vector<std::byte> all(static_cast<std::size_t>(kRows * kCols) * dst_size);
  checkpoint.read_all(checkpoint.tensor("matrix"), dst_dtype, all.data());
  for (std::size_t i = 0; i < static_cast<std::size_t>(kRows * kCols); ++i) {
    const auto expected = expected_element(matrix, i);
    ASSERT_EQ(std::memcmp(all.data() + i * dst_size, expected.data(), dst_size), 0) << i;
  }
}

std::string dtype_pair_name(const ::testing::TestParamInfo<std::tuple<DType, DType>>& info) {
  return std::string(dtype_name(std::get<0>(info.param))) + "_to_" +
         std::string(dtype_name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllDTypePairs, SafetensorsSlices,
                         ::testing::Combine(::testing::ValuesIn(kAllDTypes),
                                            ::testing::ValuesIn(kAllDTypes)),
                         dtype_pair_name);

TEST(SafetensorsRead, SliceOutsideTheShapeNamesTensorAndFile) {
  TempDir dir;
  SafetensorsWriter writer;
  writer.add("layer.weight", DType::kF32, {4, 6},
             [](std::span<std::byte> out) { std::memset(out.data(), 0, out.size()); });
  writer.add("layer.bias", DType::kF32, {4},
             [](std::span<std::byte> out) { std::memset(out.data(), 0, out.size()); });
  writer.add("conv", DType::kF32, {2, 2, 2},
             [](std::span<std::byte> out) { std::memset(out.data(), 0, out.size()); });
  writer.write(dir.path());
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  std::vector<float> out(64);
  const TensorInfo& weight = checkpoint.tensor("layer.weight");
  const TensorInfo& bias = checkpoint.tensor("layer.bias");
  const TensorSlice bad_slices[] = {{0, 5, 0, 6}, {-1, 2, 0, 6}, {3, 2, 0, 6},
                                    {0, 4, 0, 7}, {0, 4, -1, 2}, {0, 4, 4, 3}};
  for (const TensorSlice& slice : bad_slices) {
    try {
      checkpoint.read(weight, slice, DType::kF32, out.data());
      FAIL() << "expected an error for rows [" << slice.row_begin << ", " << slice.row_end
             << ") cols [" << slice.col_begin << ", " << slice.col_end << ")";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr("model.safetensors"), HasSubstr("'layer.weight'"),
                                  HasSubstr("[4, 6]"), HasSubstr("outside")));
    }
  }
  try {
    checkpoint.read(bias, {2, 5, 0, 0}, DType::kF32, out.data());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("model.safetensors"), HasSubstr("'layer.bias'"),
                                HasSubstr("[2, 5)"), HasSubstr("outside")));
  }
  try {
    checkpoint.read(checkpoint.tensor("conv"), {0, 1, 0, 1}, DType::kF32, out.data());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("'conv'"), HasSubstr("rank 3"), HasSubstr("read_all")));
  }
  checkpoint.read_all(checkpoint.tensor("conv"), DType::kBF16, out.data());

  // A TensorInfo that is not this checkpoint's is refused rather than read out of bounds.
  TensorInfo forged = weight;
  forged.data_offset += 1'000'000;
  EXPECT_THROW(checkpoint.read(forged, {0, 1, 0, 1}, DType::kF32, out.data()), Error);
  forged = weight;
  forged.name = "ghost";
  try {
    checkpoint.read_all(forged, DType::kF32, out.data());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor 'ghost' is missing from"));
  }
}

TEST(SafetensorsRead, MissingTensorNamesTheDirectory) {
  TempDir dir;
  SafetensorsWriter writer;
  writer.add("present", DType::kF32, {1},
             [](std::span<std::byte> out) { std::memset(out.data(), 0, out.size()); });
  writer.write(dir.path());
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_TRUE(checkpoint.contains("present"));
  EXPECT_FALSE(checkpoint.contains("absent"));
  try {
    checkpoint.tensor("absent");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("tensor 'absent' is missing from"),
                                HasSubstr(dir.path().string())));
  }
}

// ---------------------------------------------------------------------------------------------
// Sharded checkpoints
// ---------------------------------------------------------------------------------------------

TEST(SafetensorsSharded, GreedyPackingWritesShardsAndIndex) {
  TempDir dir;
  std::vector<std::vector<std::byte>> data;
  for (std::uint32_t i = 0; i < 5; ++i) data.push_back(random_bytes(1000, 100 + i));
  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  for (std::size_t i = 0; i < data.size(); ++i) {
    writer.add("t" + std::to_string(i), DType::kF16, {500}, copy_of(data[i]));
  }
  const auto written = writer.write(dir.path(), 2500);
  EXPECT_THAT(written, ElementsAre(dir / "model-00001-of-00003.safetensors",
                                   dir / "model-00002-of-00003.safetensors",
                                   dir / "model-00003-of-00003.safetensors",
                                   dir / "model.safetensors.index.json"));
  EXPECT_THAT(directory_listing(dir.path()),
              ElementsAre("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                          "model-00003-of-00003.safetensors", "model.safetensors.index.json"));

  const auto index = nlohmann::json::parse(read_text(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 5000);
  const nlohmann::json expected_map = {{"t0", "model-00001-of-00003.safetensors"},
                                       {"t1", "model-00001-of-00003.safetensors"},
                                       {"t2", "model-00002-of-00003.safetensors"},
                                       {"t3", "model-00002-of-00003.safetensors"},
                                       {"t4", "model-00003-of-00003.safetensors"}};
  EXPECT_EQ(index["weight_map"], expected_map);

  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.file_count(), 3u);
  EXPECT_EQ(checkpoint.total_bytes(), 5000u);
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::string name = "t" + std::to_string(i);
    SCOPED_TRACE(name);
    EXPECT_EQ(checkpoint.file_of(checkpoint.tensor(name)).filename().string(),
              expected_map[name].get<std::string>());
    EXPECT_EQ(mapped_bytes(checkpoint, name), data[i]);
  }
  const SafetensorsFile shard(dir / "model-00002-of-00003.safetensors");
  EXPECT_EQ(shard.metadata().at("format"), "pt");

  // The index path itself opens the same checkpoint.
  const Checkpoint via_index = Checkpoint::open(dir / "model.safetensors.index.json");
  EXPECT_EQ(via_index.tensor_names(), checkpoint.tensor_names());
  EXPECT_EQ(via_index.directory(), dir.path());
}

TEST(SafetensorsSharded, OversizedTensorGetsItsOwnShard) {
  TempDir dir;
  const auto small_a = random_bytes(100, 1);
  const auto big = random_bytes(5000, 2);
  const auto small_b = random_bytes(100, 3);
  const auto small_c = random_bytes(100, 4);
  SafetensorsWriter writer;
  writer.add("a", DType::kF32, {25}, copy_of(small_a));
  writer.add("big", DType::kF32, {50, 25}, copy_of(big));
  writer.add("b", DType::kBF16, {50}, copy_of(small_b));
  writer.add("c", DType::kF16, {50}, copy_of(small_c));
  const auto written = writer.write(dir.path(), 1000);
  ASSERT_EQ(written.size(), 4u);  // [a] [big] [b c] + index
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.file_count(), 3u);
  EXPECT_EQ(checkpoint.file_of(checkpoint.tensor("a")).filename(),
            "model-00001-of-00003.safetensors");
  EXPECT_EQ(checkpoint.file_of(checkpoint.tensor("big")).filename(),
            "model-00002-of-00003.safetensors");
  EXPECT_EQ(checkpoint.file_of(checkpoint.tensor("b")).filename(),
            "model-00003-of-00003.safetensors");
  EXPECT_EQ(checkpoint.file_of(checkpoint.tensor("c")).filename(),
            "model-00003-of-00003.safetensors");
  EXPECT_EQ(mapped_bytes(checkpoint, "big"), big);
  EXPECT_EQ(mapped_bytes(checkpoint, "c"), small_c);
}

TEST(SafetensorsSharded, EverythingFittingInOneShardWritesASingleFile) {
  TempDir dir;
  const auto data = random_bytes(200, 9);
  SafetensorsWriter writer;
  writer.add("a", DType::kF32, {50}, copy_of(data));
  writer.add("b", DType::kF32, {50},
             [&](std::span<std::byte> out) { std::memcpy(out.data(), data.data(), out.size()); });
  EXPECT_THAT(writer.write(dir.path(), 400), ElementsAre(dir / "model.safetensors"));
  EXPECT_THAT(directory_listing(dir.path()), ElementsAre("model.safetensors"));
}

TEST(SafetensorsSharded, SingleFileWriteRemovesAStaleIndex) {
  TempDir dir;
  const auto data = random_bytes(200, 9);
  SafetensorsWriter sharded;
  sharded.add("old_a", DType::kF32, {50}, copy_of(data));
  sharded.add("old_b", DType::kF32, {50}, copy_of(data));
  sharded.write(dir.path(), 200);
  ASSERT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));

  SafetensorsWriter single;
  single.add("new", DType::kF32, {50}, copy_of(data));
  single.write(dir.path());
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_THAT(checkpoint.tensor_names(), ElementsAre("new"));
}

TEST(SafetensorsSharded, OpeningASingleFilePath) {
  TempDir dir;
  const auto data = random_bytes(8, 9);
  SafetensorsWriter writer;
  writer.add("x", DType::kBF16, {2, 2}, copy_of(data));
  writer.write(dir / "nested" / "deeper");
  const Checkpoint checkpoint = Checkpoint::open(dir / "nested" / "deeper" / "model.safetensors");
  EXPECT_EQ(checkpoint.directory(), dir / "nested" / "deeper");
  EXPECT_EQ(mapped_bytes(checkpoint, "x"), data);
}

// ---------------------------------------------------------------------------------------------
// Writer errors
// ---------------------------------------------------------------------------------------------

TEST(SafetensorsWriterErrors, BadDeclarationsAreRejected) {
  SafetensorsWriter writer;
  const auto zero = [](std::span<std::byte> out) { std::memset(out.data(), 0, out.size()); };
  writer.add("w", DType::kF32, {2}, zero);
  try {
    writer.add("w", DType::kF16, {2}, zero);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("'w'"), HasSubstr("twice")));
  }
  try {
    writer.add("neg", DType::kF32, {2, -3}, zero);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("'neg'"), HasSubstr("shape[1] is -3")));
  }
  EXPECT_THROW(writer.add("", DType::kF32, {1}, zero), Error);
  EXPECT_THROW(writer.add("__metadata__", DType::kF32, {1}, zero), Error);
  EXPECT_THROW(writer.add("nofill", DType::kF32, {1}, nullptr), Error);
  EXPECT_THROW(writer.add("huge", DType::kF32, {1LL << 40, 1LL << 40}, zero), Error);
  writer.add("empty_but_wide", DType::kF32, {1LL << 40, 1LL << 40, 0}, zero);  // 0 bytes: fine
}

TEST(SafetensorsWriterErrors, AFailingFillLeavesNoFilesBehind) {
  for (const std::uint64_t max_shard_bytes : {std::uint64_t{0}, std::uint64_t{16}}) {
    SCOPED_TRACE(max_shard_bytes);
    TempDir dir;
    SafetensorsWriter writer;
    writer.add("ok", DType::kF32, {4},
               [](std::span<std::byte> out) { std::memset(out.data(), 1, out.size()); });
    writer.add("bad", DType::kF32, {4},
               [](std::span<std::byte>) { throw Error("fill of 'bad' failed on purpose"); });
    try {
      writer.write(dir / "out", max_shard_bytes);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("on purpose"));
    }
    EXPECT_TRUE(directory_listing(dir / "out").empty());
  }
}

}  // namespace
}  // namespace selfspec
