// The tokenizers' text helpers: UTF-8 repair as String::from_utf8_lossy / Python's
// errors="replace" (expected values from Python), the GPT-2 byte <-> unicode table, and the
// Oniguruma -> PCRE2 pattern rewrite (\s as exactly White_Space, \p{L} / \p{N} with Unicode 16's
// additions, as the Oniguruma of HF tokenizers has them).
#include "tokenizer/byte_level.hpp"
#include "tokenizer/pcre2_regex.hpp"
#include "tokenizer/utf8.hpp"

#include <gtest/gtest.h>

#include <set>

namespace selfspec {
namespace {

TEST(Utf8, LossyRepairReplacesMaximalSubparts) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8::to_valid_lossy("\xF0\x9F\x98"), fffd);
  EXPECT_EQ(utf8::to_valid_lossy("\xC3\xC3\x82"), fffd + "\xC3\x82");
  EXPECT_EQ(utf8::to_valid_lossy("\xE0\x80\x80"), fffd + fffd + fffd);             // overlong
  EXPECT_EQ(utf8::to_valid_lossy("\xED\xA0\x80"), fffd + fffd + fffd);             // surrogate
  EXPECT_EQ(utf8::to_valid_lossy("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // > U+10FFFF
  EXPECT_EQ(utf8::to_valid_lossy("\xFF"), fffd);
  EXPECT_EQ(utf8::to_valid_lossy("a\xE6\x97"), "a" + fffd);
  EXPECT_EQ(utf8::to_valid_lossy("\xE6\x97"
                                 "a\xF0\x9F\x98\x80"),
            fffd + "a\xF0\x9F\x98\x80");
  EXPECT_EQ(utf8::to_valid_lossy("plain ascii, café, 日本"), "plain ascii, café, 日本");
  EXPECT_TRUE(utf8::is_valid("café 😀"));
  EXPECT_FALSE(utf8::is_valid("caf\xC3"));
}

TEST(Utf8, WhiteSpace) {
  EXPECT_EQ(utf8::leading_white_space_bytes(" \t\u00a0x "), 4U);
  EXPECT_EQ(utf8::trailing_white_space_start("x \u3000\n"), 1U);
  EXPECT_EQ(utf8::trailing_white_space_start("x"), 1U);
  EXPECT_TRUE(utf8::is_white_space(0x85));
  EXPECT_FALSE(utf8::is_white_space(0x200B));  // zero width space is not White_Space
}

TEST(ByteLevel, Gpt2Table) {
  EXPECT_EQ(byte_level::encode(" "), "Ġ");
  EXPECT_EQ(byte_level::encode("\n"), "Ċ");
  EXPECT_EQ(byte_level::encode("a!~"), "a!~");
  EXPECT_EQ(byte_level::encode("\xC3\xA9"), "Ã©");  // é
  std::set<std::string_view> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string_view text = byte_level::encode_byte(static_cast<std::uint8_t>(b));
    EXPECT_TRUE(seen.insert(text).second) << b;
    std::string decoded;
    byte_level::append_decoded_token(text, decoded);
    EXPECT_EQ(decoded, std::string(1, static_cast<char>(b)));
  }
  // A token with characters outside the table decodes to its own bytes.
  std::string out;
  byte_level::append_decoded_token("<|ü x|>", out);
  EXPECT_EQ(out, "<|ü x|>");
}

TEST(Pcre2Regex, OnigurumaClasses) {
  const std::string ws = R"(\x{9}-\x{D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028})"
                         R"(\x{2029}\x{202F}\x{205F}\x{3000})";
  EXPECT_EQ(oniguruma_to_pcre2(R"(\s+(?!\S)|\s+)"), "[" + ws + "]+(?![^" + ws + "])|[" + ws + "]+");
  const std::string class_pattern = oniguruma_to_pcre2(R"( ?[^\s\p{L}\p{N}]+[\r\n]*)");
  EXPECT_TRUE(class_pattern.starts_with(" ?[^" + ws + R"(\p{L}\x{1C89})")) << class_pattern;
  EXPECT_TRUE(class_pattern.ends_with(R"(\x{1E5FA}]+[\r\n]*)")) << class_pattern;
  EXPECT_EQ(oniguruma_to_pcre2(R"([]\s][\\s]\\s)"), "[]" + ws + R"(][\\s]\\s)");
  const Pcre2Regex space(R"(\s+)", Pcre2Regex::Syntax::kOniguruma, "test");
  const auto matches = space.find_all("a\u0085b \u00a0c\u180e");
  ASSERT_EQ(matches.size(), 2U);  // U+0085 is White_Space, U+180E is not (Oniguruma)
  EXPECT_EQ(matches[0], std::make_pair(std::size_t{1}, std::size_t{3}));
  EXPECT_EQ(matches[1], std::make_pair(std::size_t{4}, std::size_t{7}));
  // Letters / numbers of Unicode 15-16 count as \p{L} / \p{N}, as in HF's Oniguruma.
  const Pcre2Regex letters(R"(\p{L}+)", Pcre2Regex::Syntax::kOniguruma, "test");
  EXPECT_EQ(letters.find_all("a\U00031350\u1C89 b").size(), 2U);
  const Pcre2Regex numbers(R"([^\p{N}]+)", Pcre2Regex::Syntax::kOniguruma, "test");
  EXPECT_EQ(numbers.find_all("a\U0001E5F1b1c").size(), 3U);
  const Pcre2Regex literal("a.b", Pcre2Regex::Syntax::kLiteral, "test");
  EXPECT_EQ(literal.find_all("axb a.b").size(), 1U);
  const Pcre2Regex case_insensitive(R"((?i:'s|'t))", Pcre2Regex::Syntax::kOniguruma, "test");
  EXPECT_EQ(case_insensitive.find_all("IT'S it's IT'T").size(), 3U);
  // Empty matches are skipped.
  const Pcre2Regex empty("x*", Pcre2Regex::Syntax::kOniguruma, "test");
  EXPECT_EQ(empty.find_all("axxbx").size(), 2U);
}

}  // namespace
}  // namespace selfspec
