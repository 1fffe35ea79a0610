// The tokenizer interface: text <-> token ids, exactly as the reference libraries do it.
// Implementations: SentencePieceTokenizer (tokenizer.model, LLaMA-2 family; uses libsentencepiece
// itself), BpeTokenizer (HF tokenizer.json byte-level BPE, LLaMA-3 family) and GgufTokenizer
// (either of them built from a GGUF file's metadata). A tokenizer may carry the model's chat
// template.
#pragma once

#include "tokenizer/chat_template.hpp"

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

  // The model's chat template, when its files carry one (GGUF tokenizer.chat_template, or
  // tokenizer_config.json's chat_template next to tokenizer.json / tokenizer.model); null
  // otherwise. It may be an unsupported one: ChatTemplate::apply() then says why.
  const ChatTemplate* chat_template() const { return chat_template_ ? &*chat_template_ : nullptr; }
  void set_chat_template(ChatTemplate chat_template) { chat_template_ = std::move(chat_template); }

 private:
  std::optional<ChatTemplate> chat_template_;
};

// Loads tokenizer.model (SentencePiece), tokenizer.json (HF; both with the chat template of the
// tokenizer_config.json / chat_template.jinja beside them) or a GGUF file's tokenizer from a file
// path. Throws selfspec::Error naming the file when it cannot be parsed or is of an unsupported
// kind.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& file);

// The tokenizer of a model path: a GGUF file's own; in a directory tokenizer.json, then
// tokenizer.model (with the chat template of tokenizer_config.json / chat_template.jinja), else
// the directory's one .gguf file. nullptr when there is none, or the GGUF file has no tokenizer
// metadata (the model can still run with --prompt-ids).
std::unique_ptr<Tokenizer> find_tokenizer(const std::filesystem::path& model_path);

// The text of a chat as HF's apply_chat_template(messages, tokenize=False,
// add_generation_prompt) gives it, and its ids as apply_chat_template(tokenize=True) does: the
// text encoded without the tokenizer's own special tokens (the template writes BOS itself where
// the model wants one). Both throw selfspec::Error when the tokenizer has no chat template or an
// unsupported one.
std::string render_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                        bool add_generation_prompt);
std::vector<std::int32_t> encode_chat(const Tokenizer& tokenizer,
                                      std::span<const ChatMessage> messages,
                                      bool add_generation_prompt);

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
