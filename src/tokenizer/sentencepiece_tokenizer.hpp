// SentencePieceTokenizer: a tokenizer.model (LLaMA-2 family) run by libsentencepiece itself, so
// encoding is SentencePiece's own. add_special_tokens prepends BOS when the model has one (as HF
// LlamaTokenizer and llama.cpp do); decode is SentencePiece's DecodeIds.
#pragma once

#include "tokenizer/tokenizer.hpp"

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace selfspec {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // A serialized ModelProto (a tokenizer.model's bytes, or one built from GGUF metadata) and the
  // name of its source for errors.
  struct SerializedModel {
    std::string_view bytes;
    std::string_view source;
  };

  // Loads `file`; throws selfspec::Error naming it when it cannot be read or parsed.
  explicit SentencePieceTokenizer(const std::filesystem::path& file);
  // Loads a serialized model; errors name `model.source`.
  explicit SentencePieceTokenizer(SerializedModel model);
  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  // Ids outside the vocabulary are ignored. With skip_special_tokens, control ids (BOS, EOS, PAD)
  // and the unknown id are dropped, as HF's skip_special_tokens drops all special tokens; without
  // it, control ids show their piece text ("<s>", "</s>") and the rest decodes as SentencePiece
  // does.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const override;
  std::int32_t vocab_size() const override;
  std::optional<std::int32_t> bos_id() const override;
  std::vector<std::int32_t> eos_ids() const override;
  std::string_view kind() const override { return "sentencepiece"; }

 private:
  std::string source_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace selfspec
