// BpeTokenizer exactness against HF `tokenizers`: the fixtures of tests/data/tokenizer were
// written by scripts/dev/make_tokenizer_fixtures.py (a LLaMA-3-style and a GPT-2-style
// byte-level BPE trained with the tokenizers package, and the ids/texts it produced); every id
// and every decoded byte must be identical.
#include "tests/support/temp_dir.hpp"
#include "tests/unit/tokenizer/tokenizer_test_util.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace selfspec {
namespace {

using nlohmann::json;
using testing::format_ids;
using testing::printable;

const std::filesystem::path kDataDir = SELFSPEC_TOKENIZER_DATA_DIR;

const json& vectors() {
  static const json kVectors = json::parse(testing::read_file(kDataDir / "vectors.json"));
  return kVectors;
}

std::vector<std::int32_t> ids_of(const json& node) {
  return node.get<std::vector<std::int32_t>>();
}

class BpeFixtureTest : public ::testing::TestWithParam<std::string> {
 protected:
  const json& entry() const { return vectors().at("tokenizers").at(GetParam()); }
  std::unique_ptr<Tokenizer> load() const {
    return load_tokenizer(kDataDir / entry().at("file").get<std::string>());
  }
};

TEST_P(BpeFixtureTest, EncodeMatchesHfTokenizers) {
  const auto tokenizer = load();
  ASSERT_EQ(tokenizer->kind(), "bpe");
  const json& cases = entry().at("cases");
  ASSERT_GE(cases.size(), 60U);
  for (const json& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const auto with_special = ids_of(c.at("ids_with_special"));
    const auto without_special = ids_of(c.at("ids_without_special"));
    EXPECT_EQ(tokenizer->encode(text, true), with_special)
        << "text " << printable(text) << " expected " << format_ids(with_special) << " got "
        << format_ids(tokenizer->encode(text, true));
    EXPECT_EQ(tokenizer->encode(text, false), without_special)
        << "text " << printable(text) << " expected " << format_ids(without_special) << " got "
        << format_ids(tokenizer->encode(text, false));
  }
}

TEST_P(BpeFixtureTest, DecodeMatchesHfTokenizers) {
  const auto tokenizer = load();
  for (const json& c : entry().at("cases")) {
    const auto ids = ids_of(c.at("ids_with_special"));
    const std::string decoded = c.at("decoded").get<std::string>();
    const std::string skipped = c.at("decoded_skip_special").get<std::string>();
    EXPECT_EQ(tokenizer->decode(ids, false), decoded)
        << "ids " << format_ids(ids) << ": expected " << printable(decoded) << " got "
        << printable(tokenizer->decode(ids, false));
    EXPECT_EQ(tokenizer->decode(ids, true), skipped)
        << "ids " << format_ids(ids) << ": expected " << printable(skipped) << " got "
        << printable(tokenizer->decode(ids, true));
  }
  // Cut multi-byte characters (U+FFFD as String::from_utf8_lossy), unknown ids, specials.
  const json& decode_cases = entry().at("decode_cases");
  ASSERT_GT(decode_cases.size(), 10U);
  for (const json& c : decode_cases) {
    const auto ids = ids_of(c.at("ids"));
    const bool skip = c.at("skip_special_tokens").get<bool>();
    const std::string expected = c.at("text").get<std::string>();
    EXPECT_EQ(tokenizer->decode(ids, skip), expected)
        << "ids " << format_ids(ids) << " skip " << skip << ": expected " << printable(expected)
        << " got " << printable(tokenizer->decode(ids, skip));
  }
}

TEST_P(BpeFixtureTest, RoundTripsEveryText) {
  const auto tokenizer = load();
  for (const json& c : entry().at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    // lstrip / rstrip added tokens swallow the white space next to them, by design.
    if (text.find("<mask>") != std::string::npos || text.find("[RSTRIP]") != std::string::npos) {
      continue;
    }
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(text, false), false), text) << printable(text);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BpeFixtureTest,
                         ::testing::Values(std::string("llama3_style"), std::string("gpt2_style")));

TEST(BpeFixture, FixturesCoverBothMergeFormatsAndIgnoreMerges) {
  const json llama3 = json::parse(testing::read_file(kDataDir / "llama3_style.tokenizer.json"));
  const json gpt2 = json::parse(testing::read_file(kDataDir / "gpt2_style.tokenizer.json"));
  EXPECT_TRUE(llama3.at("model").at("merges").at(0).is_array());
  EXPECT_TRUE(gpt2.at("model").at("merges").at(0).is_string());
  EXPECT_TRUE(llama3.at("model").at("ignore_merges").get<bool>());
  EXPECT_EQ(llama3.at("pre_tokenizer").at("type"), "Sequence");
  EXPECT_EQ(gpt2.at("pre_tokenizer").at("type"), "ByteLevel");
}

TEST(BpeFixture, Llama3StyleSpecialIds) {
  const BpeTokenizer tokenizer(kDataDir / "llama3_style.tokenizer.json");
  const auto bos = tokenizer.token_to_id("<|begin_of_text|>");
  ASSERT_TRUE(bos.has_value());
  EXPECT_EQ(tokenizer.bos_id(), bos);
  const std::vector<std::int32_t> eos = {*tokenizer.token_to_id("<|end_of_text|>"),
                                         *tokenizer.token_to_id("<|eot_id|>")};
  EXPECT_EQ(tokenizer.eos_ids(), eos);
  EXPECT_EQ(tokenizer.vocab_size(), *tokenizer.token_to_id("<|end_header_id|>") + 1);
  EXPECT_EQ(tokenizer.id_to_token(*bos), "<|begin_of_text|>");
  // With add_special_tokens the template's BOS comes first.
  EXPECT_EQ(tokenizer.encode("", true), std::vector<std::int32_t>{*bos});
  EXPECT_TRUE(tokenizer.encode("", false).empty());
}

TEST(BpeFixture, Gpt2StyleHasNoBosTemplate) {
  const BpeTokenizer tokenizer(kDataDir / "gpt2_style.tokenizer.json");
  EXPECT_EQ(tokenizer.bos_id(), std::nullopt);
  const auto eos = tokenizer.token_to_id("<|endoftext|>");
  ASSERT_TRUE(eos.has_value());
  EXPECT_EQ(tokenizer.eos_ids(), std::vector<std::int32_t>{*eos});
  EXPECT_EQ(tokenizer.encode("Hello world", true), tokenizer.encode("Hello world", false));
}

TEST(BpeFixture, InvalidUtf8InputIsReplacedLikeAPythonString) {
  const BpeTokenizer tokenizer(kDataDir / "llama3_style.tokenizer.json");
  EXPECT_EQ(tokenizer.encode("a\xFF"
                             "b",
                             false),
            tokenizer.encode("a\xEF\xBF\xBD"
                             "b",
                             false));
}

TEST(BpeFixture, FindTokenizerPrefersTokenizerJson) {
  const testing::TempDir dir("tokenizer-find");
  std::filesystem::copy_file(kDataDir / "gpt2_style.tokenizer.json", dir / "tokenizer.json");
  const auto tokenizer = find_tokenizer(dir.path());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->kind(), "bpe");
  const testing::TempDir empty("tokenizer-find-empty");
  EXPECT_EQ(find_tokenizer(empty.path()), nullptr);
}

TEST(BpeFixture, LongInputsEncodeLikeShortOnes) {
  // Long runs exercise the regex engine's stack and the BPE cache.
  const BpeTokenizer tokenizer(kDataDir / "llama3_style.tokenizer.json");
  const std::string spaces(100000, ' ');
  const auto ids = tokenizer.encode(spaces + "x", false);
  EXPECT_EQ(tokenizer.decode(ids, false), spaces + "x");
  std::string words;
  for (int i = 0; i < 2000; ++i) words += "the quick brown fox ";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(words, false), false), words);
}

}  // namespace
}  // namespace selfspec
