// Every validation path of SafetensorsFile and Checkpoint::open, driven by hand-written bytes.
// Each error must name the file and, where there is one, the tensor or JSON key.
#include "core/error.hpp"
#include "model_io/safetensors.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/model_io/raw_safetensors.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace selfspec {
namespace {

using ::testing::HasSubstr;
using testing::raw_safetensors;
using testing::TempDir;

// ---------------------------------------------------------------------------------------------
// Single files
// ---------------------------------------------------------------------------------------------

struct FileCase {
  const char* name;                    // test name; the file is <name>.safetensors
  std::function<std::string()> bytes;  // the whole file
  std::vector<std::string> expected;   // substrings of the error besides the file name
};
void PrintTo(const FileCase& c, std::ostream* os) {
  *os << c.name;
}

// A tensor entry: F32 unless dtype is given.
std::string entry(const std::string& name, const std::string& shape, std::uint64_t begin,
                  std::uint64_t end, const std::string& dtype = "F32") {
  return fmt::format(R"("{}": {{"dtype": "{}", "shape": {}, "data_offsets": [{}, {}]}})", name,
                     dtype, shape, begin, end);
}

std::string header(const std::vector<std::string>& entries) {
  return fmt::format("{{{}}}", fmt::join(entries, ", "));
}

std::string with_header(const std::string& text, std::size_t data_bytes) {
  return raw_safetensors(text, data_bytes);
}

const FileCase kFileCases[] = {
    {"empty_file", [] { return std::string(); }, {"0 bytes", "too short"}},
    {"short_file", [] { return std::string("\x10\0\0\0\0", 5); }, {"5 bytes", "too short"}},
    {"zero_header_length",
     [] { return testing::le_u64(0) + std::string(16, ' '); },
     {"header length is 0"}},
    {"header_length_over_limit",
     [] { return testing::le_u64(kMaxSafetensorsHeaderBytes + 1) + "{}      "; },
     {"100000001", "exceeds the limit of 100000000"}},
    {"header_length_beyond_file",
     [] { return testing::le_u64(1000) + "{}      "; },
     {"header length 1000", "needs 1008 bytes", "only 16"}},
    {"invalid_json", [] { return with_header("{\"a\": ", 0); }, {"invalid JSON"}},
    {"trailing_garbage", [] { return with_header("{} x", 0); }, {"invalid JSON"}},
    {"header_is_array", [] { return with_header("[1, 2]", 0); }, {"JSON object", "array"}},
    {"duplicate_tensor_name",
     [] {
       return with_header(header({entry("w", "[2]", 0, 8), entry("w", "[2]", 8, 16)}), 16);
     },
     {"duplicate tensor name 'w'"}},
    {"duplicate_key_in_entry",
     [] {
       return with_header(
           R"({"w": {"dtype": "F32", "dtype": "F16", "shape": [2], "data_offsets": [0, 8]}})", 8);
     },
     {"duplicate key 'dtype'", "'w'"}},
    {"entry_not_object",
     [] { return with_header(R"({"w": 5})", 0); },
     {"tensor 'w'", "must be an object", "number 5"}},
    {"missing_dtype",
     [] { return with_header(R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", 8); },
     {"tensor 'w'", "missing 'dtype'"}},
    {"missing_shape",
     [] { return with_header(R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})", 8); },
     {"tensor 'w'", "missing 'shape'"}},
    {"missing_data_offsets",
     [] { return with_header(R"({"w": {"dtype": "F32", "shape": [2]}})", 8); },
     {"tensor 'w'", "missing 'data_offsets'"}},
    {"unsupported_dtype",
     [] { return with_header(header({entry("ids", "[2]", 0, 16, "I64")}), 16); },
     {"tensor 'ids'", "I64 is not supported (F32, BF16, F16)"}},
    {"unsupported_dtype_f64",
     [] { return with_header(header({entry("x", "[2]", 0, 16, "F64")}), 16); },
     {"tensor 'x'", "F64 is not supported"}},
    {"lowercase_dtype",
     [] { return with_header(header({entry("x", "[2]", 0, 8, "f32")}), 8); },
     {"tensor 'x'", "f32 is not supported"}},
    {"dtype_not_string",
     [] { return with_header(R"({"w": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})", 4); },
     {"tensor 'w'", "'dtype' must be a string"}},
    {"shape_not_array",
     [] { return with_header(header({entry("w", "4", 0, 16)}), 16); },
     {"tensor 'w'", "'shape' must be an array"}},
    {"shape_negative",
     [] { return with_header(header({entry("w", "[2, -2]", 0, 16)}), 16); },
     {"tensor 'w'", "shape[1] must be a non-negative integer", "-2"}},
    {"shape_float",
     [] { return with_header(header({entry("w", "[2.5]", 0, 8)}), 8); },
     {"tensor 'w'", "shape[0] must be a non-negative integer", "2.5"}},
    {"shape_string",
     [] { return with_header(header({entry("w", R"(["2"])", 0, 8)}), 8); },
     {"tensor 'w'", "shape[0] must be a non-negative integer", "string"}},
    {"shape_too_large",
     [] { return with_header(header({entry("w", "[4294967296, 4294967296, 16]", 0, 8)}), 8); },
     {"tensor 'w'", "too large"}},
    {"offsets_not_array",
     [] { return with_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": 4}})", 4); },
     {"tensor 'w'", "'data_offsets' must be [begin, end]"}},
    {"offsets_one_element",
     [] { return with_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4); },
     {"tensor 'w'", "'data_offsets' must be [begin, end]"}},
    {"offsets_three_elements",
     [] {
       return with_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", 8);
     },
     {"tensor 'w'", "'data_offsets' must be [begin, end]"}},
    {"offsets_negative",
     [] {
       return with_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4);
     },
     {"tensor 'w'", "non-negative integers", "-4"}},
    {"offsets_float",
     [] {
       return with_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4.0]}})", 4);
     },
     {"tensor 'w'", "non-negative integers"}},
    {"offsets_begin_after_end",
     [] { return with_header(header({entry("w", "[0]", 8, 4)}), 8); },
     {"tensor 'w'", "[8, 4)", "begin after end"}},
    {"offsets_beyond_data",
     [] { return with_header(header({entry("w", "[16]", 0, 64)}), 16); },
     {"tensor 'w'", "[0, 64)", "beyond the data area of 16 bytes"}},
    {"byte_count_mismatch",
     [] {
       return with_header(
           header({entry("model.layers.0.mlp.up_proj.weight", "[10, 4]", 0, 100, "BF16")}), 100);
     },
     {"tensor 'model.layers.0.mlp.up_proj.weight'",
      "data_offsets [0, 100) hold 100 bytes but shape [10, 4] × BF16 needs 80"}},
    {"byte_count_mismatch_scalar",
     [] { return with_header(header({entry("s", "[]", 0, 8)}), 8); },
     {"tensor 's'", "hold 8 bytes but shape [] × F32 needs 4"}},
    {"overlap",
     [] {
       return with_header(header({entry("a", "[4]", 0, 16), entry("b", "[4]", 8, 24)}), 24);
     },
     {"tensor 'b'", "overlap tensor 'a'"}},
    {"overlap_by_zero_size_tensor",
     [] {
       return with_header(header({entry("a", "[4]", 0, 16), entry("z", "[0]", 8, 8)}), 16);
     },
     {"tensor 'z'", "overlap tensor 'a'"}},
    {"same_range_twice",
     [] {
       return with_header(header({entry("a", "[4]", 0, 16), entry("b", "[4]", 0, 16)}), 16);
     },
     {"tensor 'b'", "overlap tensor 'a'"}},
    {"hole_between",
     [] {
       return with_header(header({entry("a", "[4]", 0, 16), entry("b", "[4]", 20, 36)}), 36);
     },
     {"tensor 'b'", "hole", "[16, 20)"}},
    {"first_not_at_zero",
     [] { return with_header(header({entry("a", "[4]", 4, 20)}), 20); },
     {"tensor 'a'", "hole", "[0, 4)"}},
    {"trailing_bytes",
     [] { return with_header(header({entry("a", "[4]", 0, 16)}), 20); },
     {"'a'", "end at data offset 16", "data area holds 20 bytes"}},
    {"data_without_tensors",
     [] { return with_header("{}", 8); },
     {"data area holds 8 bytes", "no tensors"}},
    {"metadata_not_object",
     [] { return with_header(R"({"__metadata__": ["format", "pt"]})", 0); },
     {"'__metadata__' must be an object of strings"}},
    {"metadata_value_not_string",
     [] { return with_header(R"({"__metadata__": {"format": "pt", "step": 3}})", 0); },
     {"'__metadata__' key 'step' must be a string", "number 3"}},
    {"invalid_utf8", [] { return with_header("{\"\xff\": 1}", 0); }, {"invalid JSON"}},
};

class SafetensorsFileErrors : public ::testing::TestWithParam<FileCase> {};

TEST_P(SafetensorsFileErrors, NamesFileAndCause) {
  const FileCase& c = GetParam();
  TempDir dir;
  const std::string file_name = std::string(c.name) + ".safetensors";
  testing::write_file(dir / file_name, c.bytes());
  try {
    const SafetensorsFile file(dir / file_name);
    FAIL() << "expected an error for " << c.name;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr(file_name));
    for (const std::string& part : c.expected) EXPECT_THAT(message, HasSubstr(part));
  }
}

// The in-memory constructor (what the fuzz target parses) gives the same errors, naming the source.
TEST_P(SafetensorsFileErrors, InMemoryNamesSourceAndCause) {
  const FileCase& c = GetParam();
  const std::string bytes = c.bytes();
  const std::string source = std::string(c.name) + " (in memory)";
  try {
    const SafetensorsFile file(std::as_bytes(std::span(bytes)), source);
    FAIL() << "expected an error for " << c.name;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr(source));
    for (const std::string& part : c.expected) EXPECT_THAT(message, HasSubstr(part));
  }
}

INSTANTIATE_TEST_SUITE_P(Malformed, SafetensorsFileErrors, ::testing::ValuesIn(kFileCases),
                         [](const ::testing::TestParamInfo<FileCase>& case_info) {
                           return std::string(case_info.param.name);
                         });

TEST(SafetensorsFileValid, PaddedUnpaddedAndZeroSizeTensorsAreAccepted) {
  TempDir dir;
  // Unpadded header, zero-size tensors at the start, in the middle and at the end.
  const std::string text =
      header({entry("z0", "[0, 3]", 0, 0), entry("a", "[2]", 0, 8, "F32"),
              entry("z1", "[0]", 8, 8, "BF16"), entry("b", "[2, 2]", 8, 16, "F16"),
              entry("z2", "[5, 0]", 16, 16)});
  testing::write_file(dir / "unpadded.safetensors", raw_safetensors(text, 16, /*pad=*/false));
  const SafetensorsFile file(dir / "unpadded.safetensors", 3);
  ASSERT_EQ(file.tensors().size(), 5u);
  std::vector<std::string> order;
  for (const TensorInfo& info : file.tensors()) {
    order.push_back(info.name);
    EXPECT_EQ(info.file_index, 3u);
  }
  // Sorted by offset (zero-size tensors before the tensor starting at the same offset).
  EXPECT_THAT(order, ::testing::ElementsAre("z0", "a", "z1", "b", "z2"));
  const std::uint64_t data_start = 8 + text.size();
  EXPECT_EQ(file.tensors()[1].data_offset, data_start);
  EXPECT_EQ(file.tensors()[3].data_offset, data_start + 8);
  EXPECT_EQ(file.tensors()[3].dtype, DType::kF16);
  EXPECT_EQ(file.tensors()[3].nbytes, 8u);
  EXPECT_TRUE(file.metadata().empty());

  // The same bytes in memory give the same tensors.
  const std::string bytes = raw_safetensors(text, 16, /*pad=*/false);
  const SafetensorsFile in_memory(std::as_bytes(std::span(bytes)), "unpadded (in memory)", 3);
  ASSERT_EQ(in_memory.tensors().size(), file.tensors().size());
  for (std::size_t i = 0; i < file.tensors().size(); ++i) {
    const TensorInfo& a = file.tensors()[i];
    const TensorInfo& b = in_memory.tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.data_offset, b.data_offset);
    EXPECT_EQ(a.nbytes, b.nbytes);
    EXPECT_EQ(a.file_index, b.file_index);
  }
  EXPECT_EQ(in_memory.bytes().data(), std::as_bytes(std::span(bytes)).data());

  // An empty header and no data.
  testing::write_file(dir / "empty.safetensors", raw_safetensors("{}", 0));
  EXPECT_TRUE(SafetensorsFile(dir / "empty.safetensors").tensors().empty());
  // Metadata only; unknown extra keys inside an entry are ignored.
  testing::write_file(
      dir / "meta.safetensors",
      raw_safetensors(
          R"({"__metadata__": {"format": "pt"}, "w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2], "extra": 1}})",
          2));
  const SafetensorsFile meta(dir / "meta.safetensors");
  EXPECT_EQ(meta.metadata().at("format"), "pt");
  EXPECT_EQ(meta.tensors().at(0).dtype, DType::kBF16);
}

// ---------------------------------------------------------------------------------------------
// Checkpoint directories and indexes
// ---------------------------------------------------------------------------------------------

struct IndexCase {
  const char* name;
  // shard file name -> tensors it holds (each F32 [2])
  std::map<std::string, std::vector<std::string>> shards;
  std::string index;  // contents of model.safetensors.index.json
  std::vector<std::string> expected;
};
void PrintTo(const IndexCase& c, std::ostream* os) {
  *os << c.name;
}

std::string shard_bytes(const std::vector<std::string>& tensors) {
  std::vector<std::string> entries;
  std::uint64_t offset = 0;
  for (const std::string& name : tensors) {
    entries.push_back(entry(name, "[2]", offset, offset + 8));
    offset += 8;
  }
  return raw_safetensors(header(entries), offset);
}

const std::map<std::string, std::vector<std::string>> kTwoShards = {
    {"model-00001-of-00002.safetensors", {"a", "b"}}, {"model-00002-of-00002.safetensors", {"c"}}};

std::string index_json(const std::string& weight_map) {
  return fmt::format(R"({{"metadata": {{"total_size": 24}}, "weight_map": {}}})", weight_map);
}

const std::string kGoodMap =
    R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
        "c": "model-00002-of-00002.safetensors"})";

const IndexCase kIndexCases[] = {
    {"invalid_json",
     kTwoShards,
     "{\"weight_map\": ",
     {"model.safetensors.index.json", "invalid JSON"}},
    {"not_an_object", kTwoShards, "[]", {"model.safetensors.index.json", "expected a JSON object"}},
    {"no_weight_map",
     kTwoShards,
     R"({"metadata": {}})",
     {"model.safetensors.index.json", "missing the 'weight_map'"}},
    {"weight_map_not_object",
     kTwoShards,
     R"({"weight_map": ["a"]})",
     {"model.safetensors.index.json", "'weight_map' must be an object"}},
    {"metadata_not_object",
     kTwoShards,
     R"({"metadata": 3, "weight_map": {"a": "model-00001-of-00002.safetensors"}})",
     {"model.safetensors.index.json", "'metadata' must be an object"}},
    {"shard_not_string",
     kTwoShards,
     index_json(R"({"a": 1})"),
     {"model.safetensors.index.json", "weight_map['a']", "shard file name string"}},
    {"shard_with_slash",
     kTwoShards,
     index_json(R"({"a": "sub/model.safetensors"})"),
     {"model.safetensors.index.json", "weight_map['a']", "'sub/model.safetensors'",
      "not a plain file name"}},
    {"shard_with_backslash",
     kTwoShards,
     index_json(R"({"b": "sub\\model.safetensors"})"),
     {"model.safetensors.index.json", "weight_map['b']", "not a plain file name"}},
    {"shard_parent",
     kTwoShards,
     index_json(R"({"a": ".."})"),
     {"model.safetensors.index.json", "weight_map['a']", "not a plain file name"}},
    {"shard_escaping",
     kTwoShards,
     index_json(R"({"a": "../x.safetensors"})"),
     {"model.safetensors.index.json", "weight_map['a']", "not a plain file name"}},
    {"shard_absolute",
     kTwoShards,
     index_json(R"({"a": "/etc/passwd"})"),
     {"model.safetensors.index.json", "weight_map['a']", "not a plain file name"}},
    {"shard_empty",
     kTwoShards,
     index_json(R"({"a": ""})"),
     {"model.safetensors.index.json", "weight_map['a']", "not a plain file name"}},
    {"tensor_listed_twice",
     kTwoShards,
     index_json(
         R"({"a": "model-00001-of-00002.safetensors", "a": "model-00001-of-00002.safetensors"})"),
     {"model.safetensors.index.json", "tensor 'a' is listed twice in 'weight_map'"}},
    {"shard_missing",
     kTwoShards,
     index_json(
         R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                    "c": "model-00003-of-00002.safetensors"})"),
     {"model.safetensors.index.json", "shard 'model-00003-of-00002.safetensors'", "'c'",
      "does not exist"}},
    {"listed_tensor_not_in_shard",
     kTwoShards,
     index_json(
         R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                    "c": "model-00002-of-00002.safetensors", "d": "model-00002-of-00002.safetensors"})"),
     {"model.safetensors.index.json", "tensor 'd'", "model-00002-of-00002.safetensors",
      "does not contain it"}},
    {"shard_tensor_not_in_map",
     kTwoShards,
     index_json(
         R"({"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"})"),
     {"model-00001-of-00002.safetensors", "tensor 'b'", "absent from the weight_map",
      "model.safetensors.index.json"}},
    {"shard_tensor_mapped_elsewhere",
     kTwoShards,
     index_json(
         R"({"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
                    "c": "model-00002-of-00002.safetensors"})"),
     {"model-00001-of-00002.safetensors", "tensor 'b'",
      "maps it to 'model-00002-of-00002.safetensors'"}},
    {"tensor_in_two_shards",
     {{"model-00001-of-00002.safetensors", {"a", "b"}},
      {"model-00002-of-00002.safetensors", {"b", "c"}}},
     index_json(kGoodMap),
     {"tensor 'b' is present in two shards", "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors"}},
    {"malformed_shard",
     {{"model-00001-of-00002.safetensors", {"a", "b"}}, {"model-00002-of-00002.safetensors", {}}},
     index_json(kGoodMap),
     {"model-00002-of-00002.safetensors"}},
};

class CheckpointIndexErrors : public ::testing::TestWithParam<IndexCase> {};

TEST_P(CheckpointIndexErrors, NamesFileAndTensor) {
  const IndexCase& c = GetParam();
  TempDir dir;
  for (const auto& [shard, tensors] : c.shards) {
    testing::write_file(dir / shard,
                        tensors.empty() ? std::string("\x01\0", 2) : shard_bytes(tensors));
  }
  testing::write_file(dir / "model.safetensors.index.json", c.index);
  try {
    const Checkpoint checkpoint = Checkpoint::open(dir.path());
    FAIL() << "expected an error for " << c.name;
  } catch (const Error& e) {
    for (const std::string& part : c.expected) EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

INSTANTIATE_TEST_SUITE_P(Malformed, CheckpointIndexErrors, ::testing::ValuesIn(kIndexCases),
                         [](const ::testing::TestParamInfo<IndexCase>& case_info) {
                           return std::string(case_info.param.name);
                         });

TEST(CheckpointIndex, HandWrittenIndexOpens) {
  TempDir dir;
  for (const auto& [shard, tensors] : kTwoShards)
    testing::write_file(dir / shard, shard_bytes(tensors));
  // A stale single file is ignored when an index is present; unlisted files are ignored too.
  testing::write_file(dir / "model.safetensors", "garbage");
  testing::write_file(dir / "model-00009-of-00009.safetensors", "garbage");
  testing::write_file(dir / "model.safetensors.index.json", index_json(kGoodMap));
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.file_count(), 2u);
  EXPECT_THAT(checkpoint.tensor_names(), ::testing::ElementsAre("a", "b", "c"));
  EXPECT_EQ(checkpoint.file_of(checkpoint.tensor("c")), dir / "model-00002-of-00002.safetensors");
  EXPECT_EQ(checkpoint.tensor("c").file_index, 1u);
  EXPECT_EQ(checkpoint.total_bytes(), 24u);
}

TEST(CheckpointOpen, PathErrorsSayWhatWasExpected) {
  TempDir dir;
  std::filesystem::create_directories(dir / "empty_dir");
  try {
    Checkpoint::open(dir / "empty_dir");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("empty_dir"));
    EXPECT_THAT(e.what(), HasSubstr("model.safetensors.index.json"));
    EXPECT_THAT(e.what(), HasSubstr("model.safetensors"));
  }
  try {
    Checkpoint::open(dir / "no_such_dir");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no_such_dir"));
    EXPECT_THAT(e.what(), HasSubstr("does not exist"));
  }
  testing::write_file(dir / "weights.bin", "x");
  try {
    Checkpoint::open(dir / "weights.bin");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("weights.bin"));
    EXPECT_THAT(e.what(), HasSubstr(".safetensors file"));
  }
  // A broken model.safetensors in a directory is reported with its own name.
  std::filesystem::create_directories(dir / "broken");
  testing::write_file(dir / "broken" / "model.safetensors", testing::le_u64(0));
  try {
    Checkpoint::open(dir / "broken");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.safetensors"));
    EXPECT_THAT(e.what(), HasSubstr("header length is 0"));
  }
}

}  // namespace
}  // namespace selfspec
