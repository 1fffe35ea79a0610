// Skip-set files: every shipped configs/skips/ file loads and equals the published Draft & Verify
// lists (embedded here, so the test needs nothing outside the repository), YAML and JSON load
// alike, and every load error names the file and the offending key or index.
#include "core/error.hpp"
#include "draft/skip_set.hpp"
#include "model/layer_plan.hpp"
#include "tests/support/temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace selfspec {
namespace {

using ::selfspec::testing::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const std::filesystem::path kSkipsDir = SELFSPEC_SKIPS_DIR;

// Draft & Verify (Zhang et al., ACL 2024), published skip sets.
struct Published {
  std::string file;
  int num_layers;
  std::vector<int> attention;
  std::vector<int> mlp;
};

const std::vector<Published>& published() {
  static const std::vector<Published> sets = {
      {"llama-2-13b",
       40,
       {3, 5, 6, 8, 10, 11, 14, 15, 18, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 33, 34, 35, 36, 37},
       {6, 9, 10, 11, 15, 24, 25, 27, 28, 35}},
      {"llama-2-13b-chat",
       40,
       {7,  8,  9,  10, 11, 14, 15, 18, 22, 23, 24, 26,
        27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38},
       {7, 10, 11, 14, 27, 30, 32, 33, 37, 38}},
      {"codellama-13b",
       40,
       {5, 6, 9, 10, 11, 14, 15, 16, 21, 23, 24, 26, 27, 28, 29, 30, 31, 32, 34, 35, 36, 37},
       {10, 11, 12, 14, 15, 25, 26, 27, 30, 32, 33, 34}},
      {"llama-2-70b",
       80,
       {10, 11, 13, 14, 16, 18, 19, 20, 21, 22, 25, 27, 28, 29, 30, 31,
        35, 41, 43, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57,
        58, 60, 61, 62, 63, 65, 66, 67, 68, 69, 70, 74, 75, 78, 79},
       {2,  4,  9,  10, 13, 14, 16, 20, 21, 22, 24, 25, 26, 27, 28, 29, 31, 34, 37,
        41, 47, 48, 49, 50, 53, 54, 55, 57, 58, 60, 62, 63, 66, 67, 68, 70, 76}},
  };
  return sets;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// The message of the selfspec::Error that load_skip_set(path) throws ("" when it does not throw).
std::string load_error(const std::filesystem::path& path) {
  try {
    load_skip_set(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SkipSetConfigs, EveryPublishedSetIsShippedAndMatchesThePaper) {
  for (const Published& expected : published()) {
    SCOPED_TRACE(expected.file);
    const SkipSet set = load_skip_set(kSkipsDir / (expected.file + ".yaml"));
    EXPECT_EQ(set.name, expected.file);
    ASSERT_TRUE(set.num_layers.has_value());
    EXPECT_EQ(*set.num_layers, expected.num_layers);
    EXPECT_EQ(set.attention, expected.attention);
    EXPECT_EQ(set.mlp, expected.mlp);
    EXPECT_THAT(set.source, HasSubstr("Draft & Verify (Zhang et al., ACL 2024)"));

    const LayerPlan plan = set.plan(expected.num_layers);
    EXPECT_EQ(plan.num_layers(), expected.num_layers);
    EXPECT_EQ(plan.skipped_attention(), expected.attention);
    EXPECT_EQ(plan.skipped_mlp(), expected.mlp);
    EXPECT_EQ(plan.skipped_count(),
              static_cast<int>(expected.attention.size() + expected.mlp.size()));
  }
}

TEST(SkipSetConfigs, EveryShippedFileLoadsAndFitsItsDeclaredLayerCount) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kSkipsDir)) {
    const auto extension = entry.path().extension();
    if (extension != ".yaml" && extension != ".yml" && extension != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    ++count;
    const SkipSet set = load_skip_set(entry.path());
    ASSERT_TRUE(set.num_layers.has_value()) << "shipped sets declare num_layers";
    EXPECT_FALSE(set.source.empty()) << "shipped sets note their source";
    EXPECT_EQ(set.plan(*set.num_layers).num_layers(), *set.num_layers);
  }
  EXPECT_GE(count, static_cast<int>(published().size()));
}

TEST(SkipSetFile, JsonAndYamlWithTheSameContentLoadEqually) {
  TempDir yaml_dir;
  TempDir json_dir;
  write_file(yaml_dir / "set.yaml",
             "# comment\nname: demo\nsource: hand\nnum_layers: 12\nattention: [7, 3, 5]\n"
             "mlp:\n  - 10\n  - 0\n");
  write_file(json_dir / "set.json",
             R"({"name": "demo", "source": "hand", "num_layers": 12, "attention": [7, 3, 5],)"
             R"( "mlp": [10, 0]})");
  const SkipSet from_yaml = load_skip_set(yaml_dir / "set.yaml");
  const SkipSet from_json = load_skip_set(json_dir / "set.json");
  EXPECT_EQ(from_yaml, from_json);
  EXPECT_EQ(from_yaml.name, "demo");
  EXPECT_EQ(from_yaml.source, "hand");
  EXPECT_EQ(from_yaml.num_layers, 12);
  EXPECT_EQ(from_yaml.attention, (std::vector<int>{3, 5, 7}));  // sorted
  EXPECT_EQ(from_yaml.mlp, (std::vector<int>{0, 10}));
}

TEST(SkipSetFile, OptionalKeysDefault) {
  TempDir dir;
  write_file(dir / "only-mlp.yaml", "mlp: [2]\n");
  const SkipSet only_mlp = load_skip_set(dir / "only-mlp.yaml");
  EXPECT_EQ(only_mlp.name, "only-mlp");  // the file stem
  EXPECT_EQ(only_mlp.source, "");
  EXPECT_FALSE(only_mlp.num_layers.has_value());
  EXPECT_TRUE(only_mlp.attention.empty());
  EXPECT_EQ(only_mlp.mlp, std::vector<int>{2});

  write_file(dir / "empty.json", R"({"attention": [], "mlp": null})");
  const SkipSet empty = load_skip_set(dir / "empty.json");
  EXPECT_EQ(empty.name, "empty");
  EXPECT_TRUE(empty.attention.empty());
  EXPECT_TRUE(empty.mlp.empty());
  EXPECT_TRUE(empty.plan(4).is_full());

  write_file(dir / "no-lists.yaml", "name: nothing\n");
  EXPECT_TRUE(load_skip_set(dir / "no-lists.yaml").plan(3).is_full());
}

TEST(SkipSetFile, DescribeIsCompactJson) {
  TempDir dir;
  write_file(dir / "d.yaml", "name: d\nsource: 'say \"hi\"'\nattention: [4, 1]\nmlp: [2]\n");
  EXPECT_EQ(load_skip_set(dir / "d.yaml").describe(),
            R"({"name":"d","source":"say \"hi\"","num_layers":null,"attention":[1,4],"mlp":[2]})");
  SkipSet set{"n", "s", 8, {}, {3}};
  EXPECT_EQ(set.describe(), R"({"name":"n","source":"s","num_layers":8,"attention":[],"mlp":[3]})");
}

struct BadFile {
  std::string file_name;
  std::string content;
  std::vector<std::string> message_parts;  // besides the file's path
};

TEST(SkipSetFile, EveryErrorNamesTheFileAndTheKeyOrIndex) {
  const std::vector<BadFile> cases = {
      {"syntax.yaml", "attention: [1, 2\n", {"not valid YAML/JSON"}},
      {"syntax.json", R"({"attention": [1, 2], )", {"not valid YAML/JSON"}},
      {"empty.yaml", "", {"must be a mapping"}},
      {"list.yaml", "[1, 2]\n", {"must be a mapping"}},
      {"scalar.json", "42", {"must be a mapping"}},
      {"typo.yaml", "atention: [1]\n", {"unknown key 'atention'", "line 1"}},
      {"typo.json", R"({"attention": [1], "mpl": [2]})", {"unknown key 'mpl'"}},
      {"twice.yaml",
       "attention: [1]\nattention: [2]\n",
       {"key 'attention' appears more than once"}},
      {"not-a-list.yaml", "mlp: 3\n", {"mlp must be a sequence"}},
      {"map-list.yaml", "mlp: {a: 1}\n", {"mlp must be a sequence"}},
      {"float.yaml", "attention: [1, 2.5]\n", {"attention[1] = '2.5' is not an integer"}},
      {"word.yaml", "mlp: [0, 1, two]\n", {"mlp[2] = 'two' is not an integer"}},
      {"quoted.json", R"({"mlp": ["3"]})", {"mlp[0] = '3' is not an integer"}},
      {"bool.yaml", "mlp: [true]\n", {"mlp[0] = 'true' is not an integer"}},
      {"nested.yaml", "attention: [1, [2]]\n", {"attention[1]", "not a scalar"}},
      {"negative.yaml", "attention: [0, -1]\n", {"attention[1] = -1 is negative"}},
      {"huge.yaml", "mlp: [99999999999999999999]\n", {"mlp[0]", "not an integer"}},
      {"duplicate.yaml", "attention: [3, 5, 9, 5]\n", {"attention[3] = 5 repeats attention[1]"}},
      {"duplicate.json", R"({"mlp": [7, 7]})", {"mlp[1] = 7 repeats mlp[0]"}},
      {"range.yaml",
       "num_layers: 40\nattention: [1, 2, 3, 40]\n",
       {"attention[3] = 40 is outside [0, 40) (the model has 40 layers)"}},
      {"range-before.yaml",
       "mlp: [40]\nnum_layers: 40\n",
       {"mlp[0] = 40 is outside [0, 40) (the model has 40 layers)"}},
      {"max.yaml", "mlp: [256]\n", {"mlp[0] = 256 exceeds the supported maximum layer index 255"}},
      {"layers-zero.yaml", "num_layers: 0\n", {"num_layers = '0' is not an integer in [1, 256]"}},
      {"layers-word.yaml", "num_layers: forty\n", {"num_layers = 'forty'"}},
      {"layers-list.yaml", "num_layers: [40]\n", {"num_layers", "not a scalar"}},
      {"name-list.yaml", "name: [a]\n", {"name must be a string"}},
      {"name-empty.yaml", "name: ''\n", {"name must not be empty"}},
      {"source-map.yaml", "source: {paper: x}\n", {"source must be a string"}},
      {"key-list.yaml", "[a]: 1\n", {"a key is not a string"}},
      {"vocab-scalar.yaml", "draft_vocab: 5\n", {"draft_vocab must be a sequence"}},
      {"vocab-negative.yaml", "draft_vocab: [3, -2]\n", {"draft_vocab[1] = '-2'", "token id"}},
      {"vocab-word.json", R"({"draft_vocab": [1, "x"]})", {"draft_vocab[1] = 'x'"}},
      {"vocab-duplicate.yaml",
       "draft_vocab: [8, 2, 8]\n",
       {"draft_vocab[2] = 8 repeats draft_vocab[0]"}},
  };
  TempDir dir;
  for (const BadFile& c : cases) {
    SCOPED_TRACE(c.file_name);
    const std::filesystem::path path = dir / c.file_name;
    write_file(path, c.content);
    const std::string message = load_error(path);
    ASSERT_FALSE(message.empty()) << "no error for " << c.file_name;
    EXPECT_THAT(message, HasSubstr(path.string()));
    for (const std::string& part : c.message_parts) EXPECT_THAT(message, HasSubstr(part));
  }
}

// save_skip_set writes what load_skip_set reads back equal: with and without the optional keys,
// and a draft vocabulary in its (frequency) order, not sorted.
TEST(SkipSetFile, SaveLoadRoundTrip) {
  TempDir dir;
  SkipSet full;
  full.name = "searched";
  full.source = "selfspec search-skips, 40 evaluations";
  full.num_layers = 30;
  full.attention = {2, 5, 11};
  full.mlp = {7, 28};
  full.draft_vocab = {198, 13, 0, 49151, 28};
  SkipSet bare;
  bare.name = "bare";
  bare.mlp = {1};
  for (const SkipSet& set : {full, bare}) {
    SCOPED_TRACE(set.name);
    const std::filesystem::path path = dir / (set.name + ".json");
    save_skip_set(path, set);
    EXPECT_EQ(load_skip_set(path), set);
  }
  EXPECT_THAT(full.describe(), HasSubstr(R"("draft_vocab_size":5)"));
  EXPECT_THAT(bare.describe(), Not(HasSubstr("draft_vocab")));
  SkipSet unnamed = bare;
  unnamed.name.clear();
  save_skip_set(dir / "stem.json", unnamed);
  EXPECT_EQ(load_skip_set(dir / "stem.json").name, "stem");
  try {
    save_skip_set(dir / "missing-dir" / "x.json", full);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing-dir"));
  }
}

TEST(SkipSetFile, UnreadableFileIsAnErrorNamingIt) {
  TempDir dir;
  EXPECT_THAT(load_error(dir / "missing.yaml"),
              AllOf(HasSubstr((dir / "missing.yaml").string()), HasSubstr("cannot open")));
  // A directory opens but cannot be read.
  EXPECT_THAT(load_error(dir.path()), HasSubstr(dir.path().string()));
}

}  // namespace
}  // namespace selfspec
