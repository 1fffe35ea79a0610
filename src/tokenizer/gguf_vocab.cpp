// GgufVocab::read (see gguf_vocab.hpp): the tokenizer metadata of a GGUF file, key by key.
#include "tokenizer/gguf_vocab.hpp"

#include "core/error.hpp"
#include "model_io/gguf_file.hpp"

#include <limits>

namespace selfspec {
namespace {

constexpr std::string_view kModel = "tokenizer.ggml.model";
constexpr std::string_view kPre = "tokenizer.ggml.pre";
constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
constexpr std::string_view kTokenType = "tokenizer.ggml.token_type";
constexpr std::string_view kScores = "tokenizer.ggml.scores";
constexpr std::string_view kMerges = "tokenizer.ggml.merges";
constexpr std::string_view kAddBos = "tokenizer.ggml.add_bos_token";
constexpr std::string_view kAddEos = "tokenizer.ggml.add_eos_token";
constexpr std::string_view kAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
constexpr std::string_view kRemoveExtraWhitespaces = "tokenizer.ggml.remove_extra_whitespaces";
constexpr std::string_view kChatTemplate = "tokenizer.chat_template";

void read_tokens(const GgufFile& file, GgufVocab& vocab) {
  vocab.tokens = file.get_string_array(kTokens);
  SELFSPEC_CHECK(!vocab.tokens.empty(), "{}: the vocabulary is empty", vocab.where(kTokens));
  SELFSPEC_CHECK(
      vocab.tokens.size() <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
      "{}: {} tokens are more than token ids can number", vocab.where(kTokens),
      vocab.tokens.size());
}

void read_token_types(const GgufFile& file, GgufVocab& vocab) {
  if (!file.has(kTokenType)) {
    vocab.types.assign(vocab.tokens.size(), GgufTokenType::kNormal);
    return;
  }
  const std::vector<std::int64_t> types = file.get_int_array(kTokenType);
  SELFSPEC_CHECK(types.size() == vocab.tokens.size(), "{}: {} entries for {} tokens",
                 vocab.where(kTokenType), types.size(), vocab.tokens.size());
  vocab.types.reserve(types.size());
  for (std::size_t i = 0; i < types.size(); ++i) {
    SELFSPEC_CHECK(types[i] >= 0 && types[i] <= static_cast<std::int64_t>(GgufTokenType::kByte),
                   "{}: token {} (\"{}\") has unknown type {} (0..6)", vocab.where(kTokenType), i,
                   vocab.tokens[i], types[i]);
    vocab.types.push_back(static_cast<GgufTokenType>(types[i]));
  }
}

void read_scores(const GgufFile& file, GgufVocab& vocab) {
  if (!file.has(kScores)) return;
  const std::vector<double> scores = file.get_float_array(kScores);
  SELFSPEC_CHECK(scores.size() == vocab.tokens.size(), "{}: {} entries for {} tokens",
                 vocab.where(kScores), scores.size(), vocab.tokens.size());
  vocab.scores.assign(scores.begin(), scores.end());
}

std::optional<std::int32_t> read_token_id(const GgufFile& file, const GgufVocab& vocab,
                                          std::string_view key) {
  const std::optional<std::int64_t> id = file.find_int(key);
  if (!id) return std::nullopt;
  SELFSPEC_CHECK(*id >= 0 && *id < vocab.size(),
                 "{}: token id {} is outside the vocabulary [0, {})", vocab.where(key), *id,
                 vocab.size());
  return static_cast<std::int32_t>(*id);
}

void read_special_ids(const GgufFile& file, GgufVocab& vocab) {
  vocab.bos_id = read_token_id(file, vocab, "tokenizer.ggml.bos_token_id");
  vocab.eos_id = read_token_id(file, vocab, "tokenizer.ggml.eos_token_id");
  vocab.eot_id = read_token_id(file, vocab, "tokenizer.ggml.eot_token_id");
  vocab.eom_id = read_token_id(file, vocab, "tokenizer.ggml.eom_token_id");
  vocab.unknown_id = read_token_id(file, vocab, "tokenizer.ggml.unknown_token_id");
  vocab.padding_id = read_token_id(file, vocab, "tokenizer.ggml.padding_token_id");
}

void read_flags(const GgufFile& file, GgufVocab& vocab) {
  const bool llama = vocab.model == "llama";
  const bool llama3_pre =
      vocab.pre == "llama-bpe" || vocab.pre == "llama3" || vocab.pre == "llama-v3";
  vocab.add_bos = file.find_bool(kAddBos).value_or(llama || llama3_pre);
  vocab.add_eos = file.find_bool(kAddEos).value_or(false);
  vocab.add_space_prefix = file.find_bool(kAddSpacePrefix).value_or(llama);
  vocab.remove_extra_whitespaces = file.find_bool(kRemoveExtraWhitespaces).value_or(false);
  if (vocab.add_bos) {
    SELFSPEC_CHECK(vocab.bos_id.has_value(),
                   "{} is true but tokenizer.ggml.bos_token_id is missing", vocab.where(kAddBos));
  }
  if (vocab.add_eos) {
    SELFSPEC_CHECK(vocab.eos_id.has_value(),
                   "{} is true but tokenizer.ggml.eos_token_id is missing", vocab.where(kAddEos));
  }
}

}  // namespace

std::string GgufVocab::where(std::string_view key) const {
  return fmt::format("{}: key {}", source, key);
}

GgufVocab GgufVocab::read(const GgufFile& file) {
  GgufVocab vocab;
  vocab.source = file.source();
  vocab.model = file.get_string(kModel);
  vocab.pre = file.find_string(kPre).value_or("default");
  read_tokens(file, vocab);
  read_token_types(file, vocab);
  read_scores(file, vocab);
  if (file.has(kMerges)) vocab.merges = file.get_string_array(kMerges);
  read_special_ids(file, vocab);
  read_flags(file, vocab);
  vocab.chat_template = file.find_string(kChatTemplate);
  return vocab;
}

}  // namespace selfspec
