// BpeTokenizer on tokenizer.json files written by hand, with ids worked out by hand (and, at
// dev time, confirmed with HF tokenizers 0.23): merge ranks, leftmost tie-breaking, dropped
// unknown characters, added tokens, templates, the Split behaviors and Digits; then the load
// errors, which must name the file and the JSON key.
#include "core/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/tokenizer/tokenizer_test_util.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace selfspec {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Ids = std::vector<std::int32_t>;

// Byte-level vocabulary: "hello world" is [hello, Ġworld] = [11, 16] after nine merges.
constexpr const char* kHelloWorldJson = R"json({
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": [
    {"id": 17, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
     "normalized": false, "special": true},
    {"id": 18, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false,
     "normalized": false, "special": true}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                    "use_regex": true},
  "post_processor": {
    "type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "</s>", "type_id": 0}}],
    "pair": [],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [17], "tokens": ["<s>"]},
                       "</s>": {"id": "</s>", "ids": [18], "tokens": ["</s>"]}}
  },
  "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false,
              "use_regex": false},
  "model": {
    "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
    "ignore_merges": false,
    "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "w": 5, "r": 6, "d": 7, "he": 8, "ll": 9,
              "hell": 10, "hello": 11, "Ġw": 12, "or": 13, "Ġwor": 14, "Ġworl": 15,
              "Ġworld": 16},
    "merges": ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d"]
  }
})json";

// Raw-character vocabulary for the pre-tokenizer tests: merges that cross the "-" delimiter
// show where the pieces were cut.
json dash_json(const json& pre_tokenizer) {
  json j = json::parse(kHelloWorldJson);
  j["added_tokens"] = json::array();
  j["pre_tokenizer"] = pre_tokenizer;
  j["post_processor"] = nullptr;
  j["decoder"] = nullptr;
  j["model"]["vocab"] = {{"a", 0},  {"b", 1}, {"-", 2}, {"a-", 3}, {"-b", 4},
                         {"--", 5}, {"1", 6}, {"2", 7}, {"3", 8},  {"12", 9}};
  j["model"]["merges"] = {"a -", "- b", "- -", "1 2"};
  return j;
}

BpeTokenizer from(const json& j) {
  return BpeTokenizer(BpeTokenizer::JsonText{j.dump(), "test.json"});
}

TEST(BpeHandwritten, MergesByRank) {
  const BpeTokenizer t(BpeTokenizer::JsonText{kHelloWorldJson, "hello.json"});
  EXPECT_EQ(t.encode("hello world", false), (Ids{11, 16}));
  EXPECT_EQ(t.encode("hello world", true), (Ids{17, 11, 16, 18}));
  EXPECT_EQ(t.encode("hello", false), (Ids{11}));
  EXPECT_EQ(t.encode(" hello", false), (Ids{4, 11}));  // " ?\p{L}+" keeps "Ġhello"; no merge
  EXPECT_EQ(t.encode("hold", false), (Ids{0, 3, 2, 7}));
  EXPECT_EQ(t.encode("ore", false), (Ids{13, 1}));
  // Equal ranks: the leftmost pair merges first.
  EXPECT_EQ(t.encode("lll", false), (Ids{9, 2}));
  // No unk token: characters outside the vocabulary are dropped (as HF does).
  EXPECT_EQ(t.encode("hz", false), (Ids{0}));
  EXPECT_TRUE(t.encode("", false).empty());
  EXPECT_EQ(t.encode("", true), (Ids{17, 18}));
}

TEST(BpeHandwritten, AddedTokensAndDecode) {
  const BpeTokenizer t(BpeTokenizer::JsonText{kHelloWorldJson, "hello.json"});
  EXPECT_EQ(t.encode("<s>hello</s>", false), (Ids{17, 11, 18}));
  EXPECT_EQ(t.encode("<s>hello</s>", true), (Ids{17, 17, 11, 18, 18}));
  EXPECT_EQ(t.decode(Ids{17, 11, 16, 18}, false), "<s>hello world</s>");
  EXPECT_EQ(t.decode(Ids{17, 11, 16, 18}, true), "hello world");
  EXPECT_EQ(t.decode(Ids{11, 99, -1, 16}, false), "hello world");  // unknown ids ignored
  EXPECT_EQ(t.bos_id(), 17);
  EXPECT_EQ(t.eos_ids(), (Ids{18}));
  EXPECT_EQ(t.vocab_size(), 19);
  EXPECT_EQ(t.token_to_id("Ġworld"), 16);
  EXPECT_EQ(t.id_to_token(16), "Ġworld");
  EXPECT_EQ(t.id_to_token(99), std::nullopt);
}

TEST(BpeHandwritten, ByteLevelAddPrefixSpace) {
  json j = json::parse(kHelloWorldJson);
  j["pre_tokenizer"]["add_prefix_space"] = true;
  const BpeTokenizer t = from(j);
  EXPECT_EQ(t.encode("hello world", false), (Ids{4, 11, 16}));
  EXPECT_EQ(t.encode(" hello", false), (Ids{4, 11}));
}

TEST(BpeHandwritten, IgnoreMergesEmitsWholeVocabularyWords) {
  json j = json::parse(kHelloWorldJson);
  j["model"]["vocab"]["Ġhello"] = 19;  // no merge builds it
  EXPECT_EQ(from(j).encode(" hello", false), (Ids{4, 11}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(from(j).encode(" hello", false), (Ids{19}));
}

TEST(BpeHandwritten, MergesAsPairsEqualMergesAsStrings) {
  json j = json::parse(kHelloWorldJson);
  json pairs = json::array();
  for (const json& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    const auto space = s.find(' ');
    pairs.push_back({s.substr(0, space), s.substr(space + 1)});
  }
  j["model"]["merges"] = pairs;
  EXPECT_EQ(from(j).encode("hello world", false), (Ids{11, 16}));
}

TEST(BpeHandwritten, SplitBehaviors) {
  struct Case {
    const char* behavior;
    bool invert;
    Ids a_b;   // "a-b"
    Ids a__b;  // "a--b"
  };
  const Case cases[] = {
      {"Isolated", false, {0, 2, 1}, {0, 2, 2, 1}},
      {"Isolated", true, {0, 2, 1}, {0, 2, 2, 1}},
      {"Removed", false, {0, 1}, {0, 1}},
      {"Removed", true, {2}, {2, 2}},
      {"MergedWithPrevious", false, {3, 1}, {3, 2, 1}},
      {"MergedWithPrevious", true, {0, 4}, {0, 2, 4}},
      {"MergedWithNext", false, {0, 4}, {0, 2, 4}},
      {"MergedWithNext", true, {3, 1}, {3, 2, 1}},
      {"Contiguous", false, {0, 2, 1}, {0, 5, 1}},
      {"Contiguous", true, {0, 2, 1}, {0, 5, 1}},
  };
  for (const Case& c : cases) {
    const json pre = {{"type", "Split"},
                      {"pattern", {{"String", "-"}}},
                      {"behavior", c.behavior},
                      {"invert", c.invert}};
    const BpeTokenizer t = from(dash_json(pre));
    EXPECT_EQ(t.encode("a-b", false), c.a_b) << c.behavior << " invert " << c.invert;
    EXPECT_EQ(t.encode("a--b", false), c.a__b) << c.behavior << " invert " << c.invert;
  }
  // A regex pattern works the same way.
  const json regex = {{"type", "Split"},
                      {"pattern", {{"Regex", "-+"}}},
                      {"behavior", "Isolated"},
                      {"invert", false}};
  EXPECT_EQ(from(dash_json(regex)).encode("a--b", false), (Ids{0, 5, 1}));
}

TEST(BpeHandwritten, NullPreTokenizerAndDecoder) {
  const BpeTokenizer t = from(dash_json(nullptr));
  EXPECT_EQ(t.encode("a-b", false), (Ids{3, 1}));
  EXPECT_EQ(t.encode("a123", false), (Ids{0, 9, 8}));
  EXPECT_EQ(t.decode(Ids{0, 2, 1}, false), "a - b");  // no decoder: tokens joined by spaces
}

TEST(BpeHandwritten, Digits) {
  json pre = {{"type", "Digits"}, {"individual_digits", true}};
  EXPECT_EQ(from(dash_json(pre)).encode("a123", false), (Ids{0, 6, 7, 8}));
  EXPECT_EQ(from(dash_json(pre)).encode("a12a3", false), (Ids{0, 6, 7, 0, 8}));
  pre["individual_digits"] = false;
  EXPECT_EQ(from(dash_json(pre)).encode("a123", false), (Ids{0, 9, 8}));
}

TEST(BpeHandwritten, RobertaAndBertProcessing) {
  json j = dash_json(nullptr);
  j["post_processor"] = {{"type", "RobertaProcessing"},
                         {"sep", {"b", 1}},
                         {"cls", {"a", 0}},
                         {"trim_offsets", true},
                         {"add_prefix_space", false}};
  EXPECT_EQ(from(j).encode("-", true), (Ids{0, 2, 1}));
  j["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"b", 1}}, {"cls", {"a", 0}}};
  EXPECT_EQ(from(j).encode("-", true), (Ids{0, 2, 1}));
  EXPECT_EQ(from(j).encode("-", false), (Ids{2}));
  // A post-processor id beyond the vocabulary would be emitted as a token the model does not have
  // (found by fuzzing: tests/fuzz/regressions/bpe_tokenizer/post-processor-id-beyond-vocab.json).
  j["post_processor"] = {{"type", "RobertaProcessing"}, {"sep", {"b", 514}}, {"cls", {"a", 0}}};
  EXPECT_THROW(
      try { from(j); } catch (const Error& e) {
        EXPECT_THAT(e.what(), ::testing::HasSubstr("post_processor.sep[1]"));
        EXPECT_THAT(e.what(), ::testing::HasSubstr(
                                  "token id 514 is in neither model.vocab nor added_tokens"));
        throw;
      },
      Error);
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "x"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"x", {{"id", "x"}, {"ids", {99}}, {"tokens", {"x"}}}}}}};
  EXPECT_THROW(from(j), Error);
}

TEST(BpeHandwritten, UnkTokenAndByteFallback) {
  json j = dash_json(nullptr);
  j["model"]["vocab"]["<unk>"] = 10;
  j["model"]["vocab"]["<0x7A>"] = 11;  // 'z'
  j["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(from(j).encode("axyb", false), (Ids{0, 10, 10, 1}));
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(from(j).encode("axyb", false), (Ids{0, 10, 1}));
  j["model"]["byte_fallback"] = true;
  EXPECT_EQ(from(j).encode("azb", false), (Ids{0, 11, 1}));
  // HF adds byte-fallback ids before a pending (fused) unknown: "x" comes out after "z".
  EXPECT_EQ(from(j).encode("axzb", false), (Ids{0, 11, 10, 1}));
}

// ---------------------------------------------------------------------------------------------
// Load errors name the file and the key.
// ---------------------------------------------------------------------------------------------
class BpeLoadErrors : public ::testing::Test {
 protected:
  // Writes `content` as <tmp>/tokenizer.json, loads it, returns the error message.
  std::string error_text(std::string_view content) {
    testing::write_file(path(), content);
    try {
      load_tokenizer(path());
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "loading " << content.substr(0, 200) << " did not throw";
    return {};
  }
  std::string error_for(const json& j) { return error_text(j.dump()); }
  std::filesystem::path path() const { return dir_ / "tokenizer.json"; }

  testing::TempDir dir_{"tokenizer-errors"};
};

TEST_F(BpeLoadErrors, MissingFile) {
  const auto missing = dir_ / "nonexistent" / "tokenizer.json";
  try {
    load_tokenizer(missing);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing.string()));
  }
  try {
    const BpeTokenizer tokenizer(missing);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing.string()));
  }
}

TEST_F(BpeLoadErrors, MalformedJson) {
  EXPECT_THAT(error_text(R"({"model": {"type": "BPE", "vocab": {)"),
              AllOf(HasSubstr(path().string()), HasSubstr("malformed JSON")));
}

TEST_F(BpeLoadErrors, WordPieceModel) {
  json j = json::parse(kHelloWorldJson);
  j["model"]["type"] = "WordPiece";
  EXPECT_THAT(error_for(j),
              AllOf(HasSubstr(path().string()), HasSubstr("model.type"), HasSubstr("WordPiece")));
}

TEST_F(BpeLoadErrors, UnsupportedNormalizer) {
  json j = json::parse(kHelloWorldJson);
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_THAT(error_for(j),
              AllOf(HasSubstr(path().string()), HasSubstr("normalizer.type"), HasSubstr("NFC")));
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", {{{"type", "Prepend"}, {"prepend", "▁"}}}}};
  EXPECT_THAT(error_for(j),
              AllOf(HasSubstr("normalizer.normalizers[0].type"), HasSubstr("Prepend")));
}

TEST_F(BpeLoadErrors, MergeWithUnknownToken) {
  json j = json::parse(kHelloWorldJson);
  j["model"]["merges"].push_back("x y");
  EXPECT_THAT(error_for(j),
              AllOf(HasSubstr(path().string()), HasSubstr("model.merges[9]"), HasSubstr("\"x\"")));
  j = json::parse(kHelloWorldJson);
  j["model"]["merges"].push_back("h o");  // both known, "ho" is not
  EXPECT_THAT(error_for(j), AllOf(HasSubstr("model.merges[9]"), HasSubstr("\"ho\"")));
  j = json::parse(kHelloWorldJson);
  j["model"]["merges"].push_back("hello");
  EXPECT_THAT(error_for(j), AllOf(HasSubstr("model.merges[9]"), HasSubstr("one space")));
}

TEST_F(BpeLoadErrors, OtherUnsupportedComponents) {
  json j = json::parse(kHelloWorldJson);
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Digits"}, {"individual_digits", true}},
                          {{"type", "Metaspace"}, {"replacement", "▁"}}}}};
  EXPECT_THAT(error_for(j),
              AllOf(HasSubstr("pre_tokenizer.pretokenizers[1].type"), HasSubstr("Metaspace")));

  j = json::parse(kHelloWorldJson);
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_THAT(error_for(j), AllOf(HasSubstr("decoder.type"), HasSubstr("WordPiece")));

  j = json::parse(kHelloWorldJson);
  j["post_processor"]["single"][0]["SpecialToken"]["id"] = "<bos>";
  EXPECT_THAT(error_for(j), AllOf(HasSubstr("post_processor.special_tokens"), HasSubstr("<bos>")));

  j = json::parse(kHelloWorldJson);
  j["model"]["vocab"]["h"] = -3;
  EXPECT_THAT(error_for(j), AllOf(HasSubstr("model.vocab"), HasSubstr("-3")));

  j = json::parse(kHelloWorldJson);
  j["model"].erase("vocab");
  EXPECT_THAT(error_for(j), HasSubstr("\"model.vocab\": missing"));

  // An id far beyond the vocabulary's entries would size the dense id table (the fuzzer found
  // one asking for 8 GB): refused, naming it. Holes up to the slack are fine.
  j = json::parse(kHelloWorldJson);
  j["model"]["vocab"]["h"] = 2000000000;
  EXPECT_THAT(error_for(j), AllOf(HasSubstr("model.vocab"), HasSubstr("ids reach 2000000000")));
  j = json::parse(kHelloWorldJson);
  j["model"]["vocab"]["zz"] = 1000;
  testing::write_file(path(), j.dump());
  EXPECT_NO_THROW(load_tokenizer(path()));

  j = json::parse(kHelloWorldJson);
  j["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"Regex", "(unclosed"}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  EXPECT_THAT(error_for(j), AllOf(HasSubstr("pre_tokenizer.pattern"), HasSubstr("(unclosed")));

  j = json::parse(kHelloWorldJson);
  j["model"]["dropout"] = 0.1;
  EXPECT_THAT(error_for(j), HasSubstr("model.dropout"));
}

// Found by fuzzing: a post-processor could name an id no token has, which encode() then emitted
// (and bos_id() reported) beyond vocab_size().
TEST_F(BpeLoadErrors, PostProcessorIdsMustBeTokens) {
  json j = json::parse(kHelloWorldJson);
  j["post_processor"]["special_tokens"]["<s>"]["ids"] = {897};
  EXPECT_THAT(
      error_for(j),
      AllOf(HasSubstr(path().string()), HasSubstr("post_processor.special_tokens.\"<s>\".ids[0]"),
            HasSubstr("token id 897 is in neither model.vocab nor added_tokens")));
  j = json::parse(kHelloWorldJson);
  j["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"b", 1}}, {"cls", {"a", 40}}};
  EXPECT_THAT(error_for(j), AllOf(HasSubstr("post_processor.cls[1]"), HasSubstr("token id 40")));
}

TEST_F(BpeLoadErrors, OtherFileKinds) {
  // Meta's original LLaMA-3 tokenizer.model is tiktoken text.
  const auto tiktoken = dir_ / "tokenizer.model";
  testing::write_file(tiktoken, "IQ== 0\nIg== 1\nIw== 2\n");
  try {
    load_tokenizer(tiktoken);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(tiktoken.string()), HasSubstr("tiktoken")));
  }
  // Neither JSON nor a SentencePiece model.
  const auto garbage = dir_ / "garbage.model";
  testing::write_file(garbage, std::string("\x01\x02\x03 not a model", 17));
  try {
    load_tokenizer(garbage);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(garbage.string()));
  }
  EXPECT_THAT(error_text("not json at all"), HasSubstr(path().string()));
}

}  // namespace
}  // namespace selfspec
