// gguf_bpe_tokenizer_json (see gguf_bpe.hpp): the pre-tokenizer table and the JSON document.
#include "tokenizer/gguf_bpe.hpp"

#include "core/error.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/gguf_vocab.hpp"
#include "tokenizer/utf8.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <unordered_set>

namespace selfspec {
namespace {

using nlohmann::json;

// The pre-tokenizer regexes of LLaMA-3's and Qwen2's tokenizer.json (they differ in \p{N}{1,3}
// against \p{N}).
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json byte_level_step(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

json split_then_byte_level(std::string_view pattern) {
  const json split = {{"type", "Split"},
                      {"pattern", {{"Regex", pattern}}},
                      {"behavior", "Isolated"},
                      {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level_step(false)})}};
}

struct PreTokenizer {
  json pre_tokenizer;
  bool ignore_merges = false;
};

PreTokenizer pre_tokenizer(const GgufVocab& vocab) {
  const std::string& pre = vocab.pre;
  if (pre == "default" || pre == "gpt2") return {byte_level_step(true), false};
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    return {split_then_byte_level(kLlama3Pattern), true};
  }
  if (pre == "qwen2") return {split_then_byte_level(kQwen2Pattern), false};
  if (pre == "smollm") {
    const json digits = {{"type", "Digits"}, {"individual_digits", true}};
    return {{{"type", "Sequence"}, {"pretokenizers", json::array({digits, byte_level_step(true)})}},
            false};
  }
  fail(
      "{}: unsupported pre-tokenizer \"{}\" (supported: default, gpt2, llama-bpe, llama3, "
      "llama-v3, qwen2, smollm)",
      vocab.where("tokenizer.ggml.pre"), pre);
}

// Whether every character of `token` is one of the byte-level alphabet's (HF's GGUF loader
// respells any other token as the byte-level characters of its UTF-8 bytes).
bool is_byte_level_text(const std::string& token) {
  std::string bytes;
  byte_level::append_decoded_token(token, bytes);
  return byte_level::encode(bytes) == token;
}

// The vocabulary as the BPE model spells it.
std::vector<std::string> model_tokens(const GgufVocab& vocab) {
  std::vector<std::string> tokens;
  tokens.reserve(vocab.tokens.size());
  for (std::size_t id = 0; id < vocab.tokens.size(); ++id) {
    const std::string& token = vocab.tokens[id];
    SELFSPEC_CHECK(utf8::is_valid(token), "{}: token {} is not valid UTF-8",
                   vocab.where("tokenizer.ggml.tokens"), id);
    tokens.push_back(is_byte_level_text(token) ? token : byte_level::encode(token));
  }
  return tokens;
}

json merges_json(const GgufVocab& vocab, const std::vector<std::string>& tokens) {
  constexpr std::string_view kKey = "tokenizer.ggml.merges";
  SELFSPEC_CHECK(!vocab.merges.empty(), "{}: missing or empty (a gpt2 vocabulary needs merges)",
                 vocab.where(kKey));
  const std::unordered_set<std::string_view> known(tokens.begin(), tokens.end());
  json merges = json::array();
  for (std::size_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string& merge = vocab.merges[i];
    const std::size_t space = merge.find(' ', 1);
    SELFSPEC_CHECK(space != std::string::npos && merge.find(' ', space + 1) == std::string::npos,
                   "{}: merge {} \"{}\" is not two tokens separated by one space",
                   vocab.where(kKey), i, merge);
    const std::string left = merge.substr(0, space);
    const std::string right = merge.substr(space + 1);
    for (const std::string& token : {left, right, left + right}) {
      SELFSPEC_CHECK(known.contains(token),
                     "{}: merge {} \"{}\" needs token \"{}\", which is not in "
                     "tokenizer.ggml.tokens",
                     vocab.where(kKey), i, merge, token);
    }
    merges.push_back(json::array({left, right}));
  }
  return merges;
}

// Control, unknown and user-defined tokens, cut out of the text before pre-tokenization (as
// llama.cpp does, and HF's GGUF loader by adding them as added tokens).
json added_tokens_json(const GgufVocab& vocab) {
  json added = json::array();
  for (std::int32_t id = 0; id < vocab.size(); ++id) {
    const GgufTokenType type = vocab.type(id);
    if (type != GgufTokenType::kControl && type != GgufTokenType::kUnknown &&
        type != GgufTokenType::kUserDefined) {
      continue;
    }
    added.push_back({{"id", id},
                     {"content", vocab.text(id)},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", type != GgufTokenType::kUserDefined}});
  }
  return added;
}

}  // namespace

std::string gguf_bpe_tokenizer_json(const GgufVocab& vocab) {
  const PreTokenizer pre = pre_tokenizer(vocab);
  const std::vector<std::string> tokens = model_tokens(vocab);
  json vocabulary = json::object();
  for (std::size_t id = 0; id < tokens.size(); ++id) vocabulary[tokens[id]] = id;
  json model = {{"type", "BPE"},
                {"vocab", std::move(vocabulary)},
                {"merges", merges_json(vocab, tokens)},
                {"ignore_merges", pre.ignore_merges},
                {"byte_fallback", false},
                {"fuse_unk", false},
                {"dropout", nullptr},
                {"unk_token", nullptr}};
  const json document = {{"version", "1.0"},          {"added_tokens", added_tokens_json(vocab)},
                         {"normalizer", nullptr},     {"pre_tokenizer", pre.pre_tokenizer},
                         {"post_processor", nullptr}, {"decoder", byte_level_step(true)},
                         {"model", std::move(model)}};
  return document.dump();
}

}  // namespace selfspec
