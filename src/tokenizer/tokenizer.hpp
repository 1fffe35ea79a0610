// The tokenizer interface: text <-> token ids, exactly as the reference libraries do it.
// Implementations: SentencePieceTokenizer (tokenizer.model, LLaMA-2 family; uses libsentencepiece
// itself) and BpeTokenizer (HF tokenizer.json byte-level BPE, LLaMA-3 family).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`. With add_special_tokens the tokenizer's own template applies (BOS for
  // LLaMA-2 and LLaMA-3), as HF's encode(text, add_special_tokens=True); without it, plain text.
  virtual std::vector<std::int32_t> encode(std::string_view text,
                                           bool add_special_tokens) const = 0;
  // Text of the ids. With skip_special_tokens, control/special tokens (BOS, EOS, added special
  // tokens) produce no text.
  virtual std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const = 0;
  virtual std::int32_t vocab_size() const = 0;
  virtual std::optional<std::int32_t> bos_id() const = 0;
  virtual std::vector<std::int32_t> eos_ids() const = 0;
  // "sentencepiece" or "bpe".
  virtual std::string_view kind() const = 0;
};

// Loads tokenizer.model (SentencePiece) or tokenizer.json (HF) from a file path.
// Throws selfspec::Error naming the file when it cannot be parsed or is of an unsupported kind.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& file);

// Looks in a model directory for tokenizer.json, then tokenizer.model. nullptr when neither
// exists (the model can still run with --prompt-ids).
std::unique_ptr<Tokenizer> find_tokenizer(const std::filesystem::path& model_dir);

// Turns a stream of generated ids into text as it becomes complete: never emits half a UTF-8
// character, and keeps the leading space of a word-initial piece that follows earlier context
// (SentencePiece drops it at the start of a decode). The concatenation of everything push() and
// flush() return equals the text that decode(context + ids) adds to decode(context).
class StreamingDecoder {
 public:
  // `context` are ids already shown (e.g. the prompt); their text is not emitted again.
  // Special tokens are handled as Tokenizer::decode(ids, skip_special_tokens) does.
  StreamingDecoder(const Tokenizer& tokenizer, std::span<const std::int32_t> context,
                   bool skip_special_tokens = true);
  // Returns the new text made complete by this id (possibly empty).
  std::string push(std::int32_t id);
  // Returns whatever is still held back (e.g. an incomplete UTF-8 tail at the end of generation).
  std::string flush();

 private:
  // Decodes the window; emits what lies beyond prefix_text_ unless `hold_incomplete` and the text
  // ends in U+FFFD (an incomplete character so far).
  std::string advance(bool hold_incomplete);

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  // Decoding window: ids_[0, prefix_ids_) are already shown (they give the decode its context),
  // the rest are pending. prefix_text_ is the decode of ids_[0, prefix_ids_).
  std::vector<std::int32_t> ids_;
  std::size_t prefix_ids_ = 0;
  std::string prefix_text_;
};

}  // namespace selfspec
