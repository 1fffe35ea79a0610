// The tokenizer a GGUF file describes, read from its metadata under llama.cpp's key names
// (tokenizer.ggml.*, tokenizer.chat_template) and checked: array lengths agree, special token
// ids are in range, merges name tokens of the vocabulary. Every error names the file and key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace selfspec {

class GgufFile;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class GgufTokenType : std::int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct GgufVocab {
  std::string source;  // the file, for errors
  std::string model;   // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;     // tokenizer.ggml.pre ("default" when absent)
  std::vector<std::string> tokens;
  std::vector<GgufTokenType> types;  // all kNormal when tokenizer.ggml.token_type is absent
  std::vector<float> scores;         // empty when tokenizer.ggml.scores is absent
  std::vector<std::string> merges;   // "left right" (gpt2 only)

  std::optional<std::int32_t> bos_id;
  std::optional<std::int32_t> eos_id;
  std::optional<std::int32_t> eot_id;
  std::optional<std::int32_t> eom_id;
  std::optional<std::int32_t> unknown_id;
  std::optional<std::int32_t> padding_id;
  // Absent flags take llama.cpp's defaults: BOS for "llama" vocabularies and the LLaMA-3
  // pre-tokenizer, no EOS, a prefix space for "llama".
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;
  bool remove_extra_whitespaces = false;
  std::optional<std::string> chat_template;

  // Reads and checks the tokenizer metadata of `file`.
  static GgufVocab read(const GgufFile& file);

  std::int32_t size() const { return static_cast<std::int32_t>(tokens.size()); }
  // "<file>: key <key>" for error messages.
  std::string where(std::string_view key) const;
  // The text of token `id` (which read() checked is in range).
  const std::string& text(std::int32_t id) const { return tokens[static_cast<std::size_t>(id)]; }
  GgufTokenType type(std::int32_t id) const { return types[static_cast<std::size_t>(id)]; }
};

}  // namespace selfspec
