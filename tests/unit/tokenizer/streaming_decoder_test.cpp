// StreamingDecoder: the concatenation of push() and flush() equals decode(context + ids) minus
// decode(context); no chunk ever holds half a UTF-8 character; special tokens follow
// skip_special_tokens. (The SentencePiece leading-space case is in sentencepiece_test.cpp, which
// trains the model it needs.)
#include "tests/unit/tokenizer/tokenizer_test_util.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

#include <gtest/gtest.h>

#include <map>

namespace selfspec {
namespace {

using Ids = std::vector<std::int32_t>;
using testing::printable;

const std::filesystem::path kDataDir = SELFSPEC_TOKENIZER_DATA_DIR;

// Ids stand for fixed byte strings; decode concatenates them and repairs UTF-8 like the
// byte-level decoder.
class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<std::int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode(std::span<const std::int32_t> ids, bool skip) const override {
    std::string bytes;
    for (const std::int32_t id : ids) {
      if (id == kEos) {
        if (!skip) bytes += "<eos>";
        continue;
      }
      bytes += kPieces.at(id);
    }
    return utf8::to_valid_lossy(bytes);
  }
  std::int32_t vocab_size() const override { return 6; }
  std::optional<std::int32_t> bos_id() const override { return std::nullopt; }
  std::vector<std::int32_t> eos_ids() const override { return {kEos}; }
  std::string_view kind() const override { return "test"; }

  static constexpr std::int32_t kEos = 5;

 private:
  // 日 is E6 97 A5.
  const std::map<std::int32_t, std::string> kPieces = {
      {0, "a"}, {1, "\xE6"}, {2, "\x97"}, {3, "\xA5"}, {4, " b"}};
};

TEST(StreamingDecoder, HoldsBackIncompleteCharacters) {
  const ByteTokenizer tokenizer;
  StreamingDecoder decoder(tokenizer, {});
  EXPECT_EQ(decoder.push(0), "a");
  EXPECT_EQ(decoder.push(1), "");
  EXPECT_EQ(decoder.push(2), "");
  EXPECT_EQ(decoder.push(3), "日");
  EXPECT_EQ(decoder.push(4), " b");
  EXPECT_EQ(decoder.push(1), "");
  EXPECT_EQ(decoder.flush(), "\xEF\xBF\xBD");  // an incomplete tail is flushed as U+FFFD
  EXPECT_EQ(decoder.flush(), "");
  EXPECT_EQ(decoder.push(0), "a");
}

TEST(StreamingDecoder, IncompleteCharacterFollowedByText) {
  const ByteTokenizer tokenizer;
  StreamingDecoder decoder(tokenizer, {});
  EXPECT_EQ(decoder.push(1), "");
  EXPECT_EQ(decoder.push(0),
            "\xEF\xBF\xBD"
            "a");  // the broken character cannot complete any more
}

TEST(StreamingDecoder, SpecialTokens) {
  const ByteTokenizer tokenizer;
  StreamingDecoder skipping(tokenizer, {});
  EXPECT_EQ(skipping.push(0), "a");
  EXPECT_EQ(skipping.push(ByteTokenizer::kEos), "");
  EXPECT_EQ(skipping.push(4), " b");
  StreamingDecoder showing(tokenizer, Ids{0}, /*skip_special_tokens=*/false);
  EXPECT_EQ(showing.push(ByteTokenizer::kEos), "<eos>");
}

// Streams `ids` after `context` and checks the chunks.
void check_stream(const Tokenizer& tokenizer, const Ids& context, const Ids& ids,
                  bool expect_held_back) {
  StreamingDecoder decoder(tokenizer, context);
  std::string streamed;
  bool held_back = false;
  for (const std::int32_t id : ids) {
    const std::string chunk = decoder.push(id);
    EXPECT_TRUE(utf8::is_valid(chunk));
    EXPECT_EQ(chunk.find("\xEF\xBF\xBD"), std::string::npos) << printable(chunk);
    held_back = held_back || chunk.empty();
    streamed += chunk;
  }
  streamed += decoder.flush();
  Ids all = context;
  all.insert(all.end(), ids.begin(), ids.end());
  const std::string full = tokenizer.decode(all, true);
  const std::string shown = tokenizer.decode(context, true);
  ASSERT_TRUE(full.starts_with(shown));
  EXPECT_EQ(streamed, full.substr(shown.size()));
  if (expect_held_back) {
    EXPECT_TRUE(held_back) << "no id completed a character late";
  }
}

TEST(StreamingDecoder, ByteLevelBpeMatchesFullDecode) {
  const auto tokenizer = load_tokenizer(kDataDir / "llama3_style.tokenizer.json");
  const std::string text =
      "Hello 😀👍🏽 日本語のテキスト, café — 한국어 emoji 👨‍👩‍👧 "
      "end";
  const Ids ids = tokenizer->encode(text, false);
  check_stream(*tokenizer, {}, ids, /*expect_held_back=*/true);
  check_stream(*tokenizer, tokenizer->encode("Prompt: ", true), ids, true);
  // Every split point of the id list between context and generation (where the context ends
  // on a whole character).
  for (std::size_t cut = 0; cut <= ids.size(); ++cut) {
    const Ids context(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(cut));
    if (tokenizer->decode(context, true).ends_with("\xEF\xBF\xBD")) continue;
    check_stream(*tokenizer, context,
                 Ids(ids.begin() + static_cast<std::ptrdiff_t>(cut), ids.end()), false);
  }
}

TEST(StreamingDecoder, ByteLevelSpecialTokens) {
  const auto tokenizer = load_tokenizer(kDataDir / "llama3_style.tokenizer.json");
  const Ids eot = tokenizer->encode("<|eot_id|>", false);
  ASSERT_EQ(eot.size(), 1U);
  StreamingDecoder skipping(*tokenizer, tokenizer->encode("Hi", true));
  EXPECT_EQ(skipping.push(eot[0]), "");
  StreamingDecoder showing(*tokenizer, tokenizer->encode("Hi", true), false);
  EXPECT_EQ(showing.push(eot[0]), "<|eot_id|>");
}

}  // namespace
}  // namespace selfspec
