// CompletionText: streamed completion text cut at OpenAI stop strings. What is sent never
// contains a stop string or anything after it, a tail that may still grow into a stop string is
// held back only until the next token or finish() decides, the chunks concatenate to text(), and
// the result equals a naive reference (decode every prefix of the tokens, cut at the first stop
// string found) whatever the token boundaries. A tiny tokenizer maps ids to fixed byte pieces.
#include "serve/completion_text.hpp"

#include "core/error.hpp"
#include "tokenizer/utf8.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace selfspec::serve {
namespace {

using Ids = std::vector<std::int32_t>;

// Id i stands for pieces[i]; decode concatenates the pieces and repairs UTF-8 like the byte-level
// decoder. The id after the last piece is an end-of-sequence token, shown as "<eos>" only when
// special tokens are not skipped.
class PieceTokenizer final : public Tokenizer {
 public:
  explicit PieceTokenizer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}

  std::vector<std::int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode(std::span<const std::int32_t> ids, bool skip) const override {
    std::string bytes;
    for (const std::int32_t id : ids) {
      if (id == eos()) {
        if (!skip) bytes += "<eos>";
        continue;
      }
      bytes += pieces_.at(static_cast<std::size_t>(id));
    }
    return utf8::to_valid_lossy(bytes);
  }
  std::int32_t vocab_size() const override { return eos() + 1; }
  std::optional<std::int32_t> bos_id() const override { return std::nullopt; }
  std::vector<std::int32_t> eos_ids() const override { return {eos()}; }
  std::string_view kind() const override { return "test"; }

  std::int32_t eos() const { return static_cast<std::int32_t>(pieces_.size()); }

 private:
  std::vector<std::string> pieces_;
};

// One completion run through CompletionText: what each push returned, what finish returned.
struct Completion {
  std::vector<std::string> chunks;  // one per push
  std::string rest;                 // from finish()
  std::string text;
  bool stopped = false;
  std::int64_t tokens = 0;
};

Completion run(const Tokenizer& tokenizer, const Ids& ids, std::vector<std::string> stops,
               const Ids& context = {}) {
  CompletionText completion(tokenizer, context, std::move(stops));
  Completion result;
  std::string streamed;
  for (const std::int32_t id : ids) {
    result.chunks.push_back(completion.push(id));
    streamed += result.chunks.back();
    EXPECT_TRUE(utf8::is_valid(result.chunks.back())) << "chunk cuts a character";
  }
  result.rest = completion.finish();
  streamed += result.rest;
  EXPECT_EQ(completion.finish(), "");
  result.text = completion.text();
  EXPECT_EQ(streamed, result.text) << "the stream differs from text()";
  result.stopped = completion.stopped();
  result.tokens = completion.tokens();
  return result;
}

using Chunks = std::vector<std::string>;

TEST(CompletionText, NoStops) {
  const PieceTokenizer tokenizer({"Hello", ",", " world", "!"});
  const Completion result = run(tokenizer, {0, 1, 2, 3, tokenizer.eos()}, {});
  EXPECT_EQ(result.chunks, (Chunks{"Hello", ",", " world", "!", ""}));
  EXPECT_EQ(result.rest, "");
  EXPECT_EQ(result.text, "Hello, world!");
  EXPECT_FALSE(result.stopped);
  EXPECT_EQ(result.tokens, 5);  // the end-of-sequence token counts, it just shows no text
}

TEST(CompletionText, ContextIsNotEmitted) {
  const PieceTokenizer tokenizer({"prompt ", "answer"});
  const Completion result = run(tokenizer, {1}, {"prompt"}, /*context=*/{0, 0});
  EXPECT_EQ(result.text, "answer");
  EXPECT_FALSE(result.stopped);
}

TEST(CompletionText, StopInsideOneToken) {
  const PieceTokenizer tokenizer({"Hello", " wor", "ld.\nBye", "more"});
  const Completion result = run(tokenizer, {0, 1, 2, 3, 3}, {"\n"});
  EXPECT_EQ(result.chunks, (Chunks{"Hello", " wor", "ld.", "", ""}));
  EXPECT_EQ(result.rest, "");
  EXPECT_EQ(result.text, "Hello world.");
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.tokens, 3);
}

TEST(CompletionText, StopSpanningThreeTokens) {
  const PieceTokenizer tokenizer({"ab<|", "en", "d|>cd", "x"});
  const Completion result = run(tokenizer, {0, 1, 2, 3}, {"<|end|>"});
  EXPECT_EQ(result.chunks, (Chunks{"ab", "", "", ""}));
  EXPECT_EQ(result.text, "ab");
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.tokens, 3);
}

TEST(CompletionText, TokenBoundaryInsideTheStop) {
  const PieceTokenizer tokenizer({"xST", "OPy", "z"});
  const Completion result = run(tokenizer, {0, 1, 2}, {"STOP"});
  EXPECT_EQ(result.chunks, (Chunks{"x", "", ""}));
  EXPECT_EQ(result.text, "x");
  EXPECT_EQ(result.tokens, 2);
}

TEST(CompletionText, EarliestOccurrenceWinsOverListOrder) {
  const PieceTokenizer tokenizer({"hello world"});
  const Completion result = run(tokenizer, {0}, {"world", "lo"});
  EXPECT_EQ(result.text, "hel");
  EXPECT_TRUE(result.stopped);

  // The later-listed stop string completes in an earlier token.
  const PieceTokenizer split({"say ", "END", " and ", "FIN"});
  const Completion first = run(split, {0, 1, 2, 3}, {"FIN", "END"});
  EXPECT_EQ(first.text, "say ");
  EXPECT_EQ(first.tokens, 2);
}

TEST(CompletionText, HeldBackPrefixIsReleasedByTheNextToken) {
  const PieceTokenizer tokenizer({"a#", "#b", "#"});
  const Completion result = run(tokenizer, {0, 1}, {"###"});
  EXPECT_EQ(result.chunks, (Chunks{"a", "##b"}));
  EXPECT_EQ(result.rest, "");
  EXPECT_FALSE(result.stopped);
}

TEST(CompletionText, HeldBackPrefixIsReleasedByFinish) {
  const PieceTokenizer tokenizer({"a#", "#b", "#"});
  const Completion result = run(tokenizer, {0, 2}, {"###"});
  EXPECT_EQ(result.chunks, (Chunks{"a", ""}));
  EXPECT_EQ(result.rest, "##");
  EXPECT_EQ(result.text, "a##");
  EXPECT_FALSE(result.stopped);
  EXPECT_EQ(result.tokens, 2);
}

TEST(CompletionText, PartialMatchFallsBackToAShorterOne) {
  // "aaa" is not a prefix of "aab", but its suffix "aa" is: only the first "a" may go.
  const PieceTokenizer tokenizer({"a", "b"});
  const Completion result = run(tokenizer, {0, 0, 0, 1}, {"aab"});
  EXPECT_EQ(result.chunks, (Chunks{"", "", "a", ""}));
  EXPECT_EQ(result.text, "a");
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.tokens, 4);
}

TEST(CompletionText, StopAtTheFirstToken) {
  const PieceTokenizer tokenizer({"STOP", "after"});
  const Completion result = run(tokenizer, {0, 1}, {"STOP"});
  EXPECT_EQ(result.chunks, (Chunks{"", ""}));
  EXPECT_EQ(result.text, "");
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.tokens, 1);
}

TEST(CompletionText, MultiByteCharacters) {
  const PieceTokenizer tokenizer({"日本", "語。", "x"});
  const Completion result = run(tokenizer, {0, 1, 2}, {"本語"});
  EXPECT_EQ(result.chunks, (Chunks{"日", "", ""}));  // 本 is held back: it starts 本語
  EXPECT_EQ(result.text, "日");
  EXPECT_EQ(result.tokens, 2);
}

TEST(CompletionText, CharactersSplitOverTokens) {
  // é is C3 A9 and arrives in two tokens; it is held back whole while it may start "é!".
  const PieceTokenizer tokenizer({"caf", "\xC3", "\xA9", " ok", "!"});
  const Completion released = run(tokenizer, {0, 1, 2, 3}, {"é!"});
  EXPECT_EQ(released.chunks, (Chunks{"caf", "", "", "é ok"}));
  EXPECT_FALSE(released.stopped);
  const Completion stopped = run(tokenizer, {0, 1, 2, 4, 3}, {"é!"});
  EXPECT_EQ(stopped.chunks, (Chunks{"caf", "", "", "", ""}));
  EXPECT_EQ(stopped.text, "caf");
  EXPECT_EQ(stopped.tokens, 4);
  // è (C3 A8) shares its first byte with the stop string; nothing may stay half-sent.
  const PieceTokenizer other({"\xC3", "\xA8", "x"});
  const Completion shared = run(other, {0, 1, 2}, {"é"});
  EXPECT_EQ(shared.chunks, (Chunks{"", "è", "x"}));
}

TEST(CompletionText, FinishFlushesAnIncompleteCharacter) {
  const PieceTokenizer tokenizer({"a", "\xE6"});
  const Completion result = run(tokenizer, {0, 1}, {"zz"});
  EXPECT_EQ(result.chunks, (Chunks{"a", ""}));
  EXPECT_EQ(result.rest, utf8::kReplacementCharacter);
}

TEST(CompletionText, RejectsBadStopsAndPushAfterFinish) {
  const PieceTokenizer tokenizer({"a"});
  EXPECT_THROW(CompletionText(tokenizer, {}, {""}), Error);
  EXPECT_THROW(CompletionText(tokenizer, {}, {"\xC3"}), Error);
  CompletionText completion(tokenizer, {}, {"b"});
  EXPECT_EQ(completion.push(0), "a");
  EXPECT_EQ(completion.finish(), "");
  EXPECT_THROW(completion.push(0), Error);
}

// The reference: decode every prefix of the tokens; the first prefix whose text holds a stop
// string ends the completion, cut before the earliest occurrence there.
Completion reference(const Tokenizer& tokenizer, const Ids& ids,
                     const std::vector<std::string>& stops) {
  Completion expected;
  for (std::size_t k = 1; k <= ids.size(); ++k) {
    const std::string text = tokenizer.decode(std::span(ids).first(k), true);
    std::size_t cut = std::string::npos;
    for (const std::string& stop : stops) cut = std::min(cut, text.find(stop));
    if (cut != std::string::npos) {
      expected.text = text.substr(0, cut);
      expected.stopped = true;
      expected.tokens = static_cast<std::int64_t>(k);
      return expected;
    }
  }
  expected.text = tokenizer.decode(ids, true);
  expected.tokens = static_cast<std::int64_t>(ids.size());
  return expected;
}

TEST(CompletionText, MatchesNaiveReferenceOnRandomText) {
  // Whole characters only, so that every prefix decodes to what the stream has shown so far.
  const std::vector<std::string> pieces = {"a", "b", "ab", "ba", "aab",
                                           "c", "é", "日", "\n", "b\n"};
  const std::vector<std::string> stop_parts = {"a", "b", "c", "é", "\n"};
  const PieceTokenizer tokenizer(pieces);
  std::mt19937 rng(20240607);
  auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };
  int stopped = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops(pick(4));  // 0..3 stop strings
    for (std::string& stop : stops) {
      const std::size_t length = 1 + pick(4);
      for (std::size_t i = 0; i < length; ++i) stop += stop_parts[pick(stop_parts.size())];
    }
    Ids ids(1 + pick(30));
    for (std::int32_t& id : ids) id = static_cast<std::int32_t>(pick(pieces.size()));
    const Completion expected = reference(tokenizer, ids, stops);
    const Completion actual = run(tokenizer, ids, stops);
    ASSERT_EQ(actual.text, expected.text) << "trial " << trial;
    ASSERT_EQ(actual.stopped, expected.stopped) << "trial " << trial;
    ASSERT_EQ(actual.tokens, expected.tokens) << "trial " << trial;
    for (const std::string& stop : stops) ASSERT_EQ(actual.text.find(stop), std::string::npos);
    stopped += actual.stopped ? 1 : 0;
  }
  // Both outcomes are well exercised.
  EXPECT_GT(stopped, 500);
  EXPECT_LT(stopped, 2900);
}

}  // namespace
}  // namespace selfspec::serve
