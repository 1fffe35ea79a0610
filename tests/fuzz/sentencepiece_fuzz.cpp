// Fuzz target: the SentencePiece model loader (SentencePieceTokenizer on a serialized
// tokenizer.model in memory), then encoding and decoding. The input is the model file; the
// fuzzer-derived text to encode besides the fixed one is its last kTextBytes bytes (a model
// cannot carry a suffix: protobuf would read it as fields). Loading must succeed or throw
// selfspec::Error; what a loaded tokenizer must do is in tokenizer_exercise.hpp.
//
// libsentencepiece and libprotobuf come from Debian, not instrumented: libFuzzer's coverage and
// ASan's checks stop at their boundary (crashes inside them are still caught).
#include "core/error.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "tests/fuzz/tokenizer_exercise.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace {
constexpr std::size_t kTextBytes = 64;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view model = selfspec::fuzz::as_text(data, size);
  std::unique_ptr<selfspec::SentencePieceTokenizer> tokenizer;
  try {
    tokenizer = std::make_unique<selfspec::SentencePieceTokenizer>(
        selfspec::SentencePieceTokenizer::SerializedModel{model, "fuzz/tokenizer.model"});
  } catch (const selfspec::Error&) {
    return 0;  // a clear error is the right answer to a bad file
  }
  selfspec::fuzz::exercise_tokenizer(*tokenizer, selfspec::fuzz::trailing_text(model, kTextBytes));
  return 0;
}
