// Fuzz target: the tokenizer a GGUF file's metadata describes (load_gguf_tokenizer: the gpt2
// byte-level BPE and llama SentencePiece vocabularies, special tokens, flags, the chat template),
// then encoding and decoding. The input is a whole .gguf file; the fuzzer-derived text to encode
// besides the fixed one is its last kTextBytes bytes. Parsing and loading must succeed or throw
// selfspec::Error; what a loaded tokenizer must do is in tokenizer_exercise.hpp.
#include "core/error.hpp"
#include "model_io/gguf_file.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "tests/fuzz/tokenizer_exercise.hpp"
#include "tokenizer/gguf_tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace {
constexpr std::size_t kTextBytes = 64;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<selfspec::GgufFile> file;
  std::unique_ptr<selfspec::Tokenizer> tokenizer;
  try {
    file.emplace(selfspec::fuzz::as_bytes(data, size), "fuzz.gguf");
    tokenizer = selfspec::load_gguf_tokenizer(*file);
  } catch (const selfspec::Error&) {
    return 0;  // a clear error is the right answer to a bad file
  }
  selfspec::fuzz::exercise_tokenizer(
      *tokenizer, selfspec::fuzz::trailing_text(selfspec::fuzz::as_text(data, size), kTextBytes));
  return 0;
}
