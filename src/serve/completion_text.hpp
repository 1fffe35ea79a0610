// The text of one completion as its tokens arrive, cut at the OpenAI `stop` strings, so that a
// streamed response and a non-streamed one carry exactly the same text.
//
// Tokens go through a StreamingDecoder (never half a UTF-8 character). The stop strings are looked
// for in the whole decoded text of the completion, so a stop string spread over several tokens, or
// one whose first bytes end a token, is found as soon as the token completing it arrives. Text that
// could still be the beginning of a stop string is held back until the next token decides; text
// from a stop string on is never sent. The search is incremental: every stop string keeps a
// Knuth-Morris-Pratt state over the decoded bytes, so each byte is looked at once per stop string
// and the held-back tail is the longest partial match.
#pragma once

#include "tokenizer/tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace selfspec::serve {

class CompletionText {
 public:
  // `context` are the prompt's ids: decoding context only, never emitted. `stops` are the request's
  // stop strings (OpenAI allows up to 4); each must be non-empty, well-formed UTF-8. Throws
  // selfspec::Error otherwise. The tokenizer must outlive this object.
  CompletionText(const Tokenizer& tokenizer, std::span<const std::int32_t> context,
                 std::vector<std::string> stops);

  // One generated token. Returns the text that may be sent now: everything decoded so far except a
  // tail that could still be the beginning of a stop string, and nothing from a stop string on.
  // When this token completes a stop string, the text ends right before the earliest complete
  // occurrence of any stop string and stopped() turns true; later pushes return "" and count no
  // tokens. Throws selfspec::Error after finish().
  std::string push(std::int32_t token);

  // End of generation: the held-back tail and the decoder's rest (e.g. an incomplete character,
  // as U+FFFD), still cut at a stop string should the rest complete one (stopped() then turns
  // true). Returns "" after a stop or a previous finish().
  std::string finish();

  bool stopped() const { return stopped_; }
  // Tokens pushed up to and including the one that completed the stop string; all tokens pushed
  // when not stopped (usage.completion_tokens).
  std::int64_t tokens() const { return tokens_; }
  // Everything push() and finish() returned so far, concatenated.
  const std::string& text() const { return text_; }

 private:
  // One stop string and its matcher: `failure[i]` is the length of the longest proper prefix of
  // text[0, i] that is also a suffix of it; `matched` is the length of the longest suffix of the
  // decoded text so far that is a prefix of `text` (always < text.size() while not stopped).
  struct Stop {
    std::string text;
    std::vector<std::size_t> failure;
    std::size_t matched = 0;
  };

  // Appends `fresh` to the unsent text, advances every matcher over it and returns what may be
  // sent now.
  std::string take(std::string_view fresh);

  StreamingDecoder decoder_;
  std::vector<Stop> stops_;
  // Decoded text not sent yet: the held-back tail (at most the longest stop string minus one byte)
  // plus what the last token added.
  std::string pending_;
  std::string text_;
  std::int64_t tokens_ = 0;
  bool stopped_ = false;
  bool finished_ = false;
};

}  // namespace selfspec::serve
