// What every tokenizer fuzz target does with a tokenizer that loaded: encode a fixed text and a
// fuzzer-derived one (with and without special tokens), decode the ids (with and without
// skipping special tokens) and stream them through StreamingDecoder, and decode arbitrary ids
// read from the fuzzer's bytes; a chat template the tokenizer carries renders a conversation
// (an unsupported template may refuse with selfspec::Error) whose text is encoded too. Loading,
// encoding and decoding may fail with selfspec::Error (a model can load and still be unable to
// encode some text: libsentencepiece checks its own result); nothing else may escape, and ids and
// BOS/EOS must lie in [0, vocab_size()).
//
// The streamed text is not compared with decode()'s: StreamingDecoder, like HF's DecodeStream,
// decodes a window that starts at the ids shown last, and SentencePiece strips the leading space
// of a window whose shown ids are only whitespace or skipped (unknown, control) pieces, so the
// two can differ by spaces (the first fuzz run found it; see docs/ARCHITECTURE.md, "Fuzzing").
#pragma once

#include "tests/fuzz/fuzz_support.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec::fuzz {

// Words, digits, punctuation, whitespace runs, two- and three-byte UTF-8 and an emoji.
inline constexpr std::string_view kFixedText =
    "Hello world! It's 2024: x=3.14, y = [1, 2]\n\t  done. Gr\xC3\xBC\xC3\x9F"
    "e, "
    "\xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x9A\x80 <s></s>";

inline bool in_vocabulary(const Tokenizer& tokenizer, std::int32_t id) {
  return id >= 0 && id < tokenizer.vocab_size();
}

inline void check_special_ids(const Tokenizer& tokenizer) {
  require(tokenizer.vocab_size() > 0, "a loaded tokenizer has an empty vocabulary");
  if (const std::optional<std::int32_t> bos = tokenizer.bos_id()) {
    require(in_vocabulary(tokenizer, *bos), "bos_id() is outside [0, vocab_size())");
  }
  for (const std::int32_t eos : tokenizer.eos_ids()) {
    require(in_vocabulary(tokenizer, eos), "an eos id is outside [0, vocab_size())");
  }
}

// decode(ids), and the same ids streamed one by one.
inline void check_decode(const Tokenizer& tokenizer, const std::vector<std::int32_t>& ids) {
  for (const bool skip_special : {false, true}) {
    static_cast<void>(tokenizer.decode(ids, skip_special));
    StreamingDecoder stream(tokenizer, {}, skip_special);
    for (const std::int32_t id : ids) static_cast<void>(stream.push(id));
    static_cast<void>(stream.flush());
  }
}

inline void check_encode(const Tokenizer& tokenizer, std::string_view text) {
  for (const bool add_special : {false, true}) {
    allowing_errors([&] {
      const std::vector<std::int32_t> ids = tokenizer.encode(text, add_special);
      for (const std::int32_t id : ids) {
        require(in_vocabulary(tokenizer, id), "encode() gave an id outside [0, vocab_size())");
      }
      check_decode(tokenizer, ids);
    });
  }
}

// Any ids, negative or beyond the vocabulary (decode ignores unknown ids).
inline void check_decode_any(const Tokenizer& tokenizer, std::string_view bytes) {
  std::vector<std::int32_t> ids(bytes.size() / sizeof(std::int32_t));
  if (ids.empty()) return;
  std::memcpy(ids.data(), bytes.data(), ids.size() * sizeof(std::int32_t));
  allowing_errors([&] { check_decode(tokenizer, ids); });
}

inline void check_chat_template(const Tokenizer& tokenizer) {
  const ChatTemplate* chat = tokenizer.chat_template();
  if (chat == nullptr) return;
  allowing_errors([&] {
    const std::string prompt =
        chat->apply(single_turn_chat("What is 2 + 2?", "Answer briefly."), true);
    check_encode(tokenizer, prompt);
  });
}

inline void exercise_tokenizer(const Tokenizer& tokenizer, std::string_view fuzz_text) {
  check_special_ids(tokenizer);
  check_encode(tokenizer, kFixedText);
  check_encode(tokenizer, fuzz_text);
  check_decode_any(tokenizer, fuzz_text);
  check_chat_template(tokenizer);
}

}  // namespace selfspec::fuzz
