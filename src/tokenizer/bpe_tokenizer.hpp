// BpeTokenizer: HF tokenizers' tokenizer.json with a byte-level BPE model (LLaMA-3, GPT-2,
// Qwen2-style pipelines), reimplemented to produce exactly the ids of HF
// tokenizers.Tokenizer.encode / decode for the components it supports:
//   model          BPE (vocab; merges as "a b" strings or ["a", "b"] pairs; ignore_merges;
//                  byte_fallback; unk_token/fuse_unk)
//   added_tokens   split out before pre-tokenization as HF's AddedVocabulary does (leftmost
//                  longest match; single_word, lstrip, rstrip; normalized/non-normalized passes)
//   normalizer     null only (others are rejected, naming their type)
//   pre_tokenizer  null, ByteLevel (add_prefix_space, use_regex), Split (Regex or String pattern,
//                  all five behaviors, invert), Digits (individual_digits), Sequence of these
//   post_processor null, TemplateProcessing (single), ByteLevel (no-op for ids), RobertaProcessing,
//                  BertProcessing, Sequence of these
//   decoder        ByteLevel, null (tokens joined by spaces)
// Anything else is rejected at load with an error naming the file and the JSON key.
#pragma once

#include "tokenizer/tokenizer.hpp"

#include <filesystem>
#include <memory>
#include <string>

namespace selfspec {

class BpeTokenizer final : public Tokenizer {
 public:
  // tokenizer.json text and the name of its source for error messages.
  struct JsonText {
    std::string_view text;
    std::string_view source;
  };

  // Loads a tokenizer.json file; throws selfspec::Error naming the file (and the JSON key).
  explicit BpeTokenizer(const std::filesystem::path& file);
  explicit BpeTokenizer(JsonText json);
  ~BpeTokenizer() override;
  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  // HF Tokenizer.encode(text, add_special_tokens).ids. Invalid UTF-8 in `text` is first
  // replaced by U+FFFD (a Python str cannot hold it).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  // HF Tokenizer.decode(ids, skip_special_tokens): unknown ids are ignored; skipping drops the
  // added tokens marked special.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const override;
  // One more than the largest id of the vocabulary and the added tokens.
  std::int32_t vocab_size() const override;
  // The token the post-processor template puts first, else an added token "<|begin_of_text|>"
  // or "<s>".
  std::optional<std::int32_t> bos_id() const override;
  // Added tokens with the usual end-of-sequence names ("</s>", "<|end_of_text|>", "<|eot_id|>",
  // "<|eom_id|>", "<|endoftext|>", "<|im_end|>"), ascending.
  std::vector<std::int32_t> eos_ids() const override;
  std::string_view kind() const override { return "bpe"; }

  // The id of a token (added tokens first, then the model vocabulary), as HF token_to_id.
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  // The token of an id (added tokens first), as HF id_to_token.
  std::optional<std::string> id_to_token(std::int32_t id) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace selfspec
