// Fuzz target: the tokenizer.json loader (BpeTokenizer on text in memory), then encoding and
// decoding. The input is a tokenizer.json, optionally followed by a NUL byte and a text to
// encode besides the fixed one (tokenizer_exercise.hpp). Loading must succeed or throw
// selfspec::Error; what a loaded tokenizer must do is in tokenizer_exercise.hpp.
#include "core/error.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "tests/fuzz/tokenizer_exercise.hpp"
#include "tokenizer/bpe_tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [json_text, text] = selfspec::fuzz::split_at_nul(selfspec::fuzz::as_text(data, size));
  std::unique_ptr<selfspec::BpeTokenizer> tokenizer;
  try {
    tokenizer = std::make_unique<selfspec::BpeTokenizer>(
        selfspec::BpeTokenizer::JsonText{json_text, "fuzz/tokenizer.json"});
  } catch (const selfspec::Error&) {
    return 0;  // a clear error is the right answer to a bad file
  }
  selfspec::fuzz::exercise_tokenizer(*tokenizer, text);
  return 0;
}
