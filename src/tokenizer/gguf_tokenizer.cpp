// load_gguf_tokenizer (see gguf_tokenizer.hpp): GgufTokenizer puts the metadata's special tokens
// around a BpeTokenizer or a SentencePieceTokenizer built from the same metadata.
#include "tokenizer/gguf_tokenizer.hpp"

#include "core/error.hpp"
#include "model_io/gguf_file.hpp"
#include "tokenizer/added_tokens.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/gguf_bpe.hpp"
#include "tokenizer/gguf_vocab.hpp"
#include "tokenizer/sentencepiece_model_proto.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"
#include "tokenizer/utf8.hpp"

#include <algorithm>
#include <set>

namespace selfspec {
namespace {

class GgufTokenizer final : public Tokenizer {
 public:
  // `split_added_tokens`: cut control, unknown and user-defined tokens out of the text here
  // (the inner tokenizer does not know them as such).
  GgufTokenizer(const GgufVocab& vocab, std::unique_ptr<Tokenizer> inner, bool split_added_tokens)
      : inner_(std::move(inner)),
        vocab_size_(vocab.size()),
        bos_id_(vocab.bos_id),
        eos_id_(vocab.eos_id),
        add_bos_(vocab.add_bos),
        add_eos_(vocab.add_eos) {
    std::set<std::int32_t> eos;
    for (const auto& id : {vocab.eos_id, vocab.eot_id, vocab.eom_id}) {
      if (id) eos.insert(*id);
    }
    eos_ids_.assign(eos.begin(), eos.end());
    if (split_added_tokens) make_splitter(vocab);
  }
  GgufTokenizer(const GgufTokenizer&) = delete;
  GgufTokenizer& operator=(const GgufTokenizer&) = delete;

  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<std::int32_t> ids;
    if (add_special_tokens && add_bos_) ids.push_back(*bos_id_);
    const std::string input = utf8::is_valid(text) ? std::string(text) : utf8::to_valid_lossy(text);
    std::vector<Segment> segments;
    splitter_.split(input, segments);
    for (const Segment& segment : segments) {
      if (segment.added_id) {
        ids.push_back(*segment.added_id);
      } else {
        const std::vector<std::int32_t> piece = inner_->encode(segment.text, false);
        ids.insert(ids.end(), piece.begin(), piece.end());
      }
    }
    if (add_special_tokens && add_eos_) ids.push_back(*eos_id_);
    return ids;
  }
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const override {
    return inner_->decode(ids, skip_special_tokens);
  }
  std::int32_t vocab_size() const override { return vocab_size_; }
  std::optional<std::int32_t> bos_id() const override { return bos_id_; }
  std::vector<std::int32_t> eos_ids() const override { return eos_ids_; }
  std::string_view kind() const override { return inner_->kind(); }

 private:
  void make_splitter(const GgufVocab& vocab) {
    for (std::int32_t id = 0; id < vocab.size(); ++id) {
      const GgufTokenType type = vocab.type(id);
      if (type == GgufTokenType::kControl || type == GgufTokenType::kUnknown ||
          type == GgufTokenType::kUserDefined) {
        added_.push_back({.id = id,
                          .content = vocab.text(id),
                          .special = type != GgufTokenType::kUserDefined,
                          .normalized = false});
      }
    }
    std::vector<const AddedToken*> tokens;
    for (const AddedToken& token : added_) tokens.push_back(&token);
    splitter_ = AddedTokenSplitter(std::move(tokens));
  }

  std::unique_ptr<Tokenizer> inner_;
  std::int32_t vocab_size_;
  std::optional<std::int32_t> bos_id_;
  std::optional<std::int32_t> eos_id_;
  bool add_bos_;
  bool add_eos_;
  std::vector<std::int32_t> eos_ids_;
  std::vector<AddedToken> added_;  // the splitter points into it: filled once, never resized
  AddedTokenSplitter splitter_;
};

std::unique_ptr<Tokenizer> byte_level_bpe(const GgufVocab& vocab) {
  const std::string json = gguf_bpe_tokenizer_json(vocab);
  auto inner = std::make_unique<BpeTokenizer>(BpeTokenizer::JsonText{json, vocab.source});
  return std::make_unique<GgufTokenizer>(vocab, std::move(inner), false);
}

std::unique_ptr<Tokenizer> sentencepiece_bpe(const GgufVocab& vocab) {
  const std::string proto = gguf_sentencepiece_model_proto(vocab);
  // SentencePiece's own complaints (an empty or duplicate piece, bad byte pieces) are about the
  // vocabulary.
  const std::string source = vocab.where("tokenizer.ggml.tokens");
  auto inner = std::make_unique<SentencePieceTokenizer>(
      SentencePieceTokenizer::SerializedModel{proto, source});
  return std::make_unique<GgufTokenizer>(vocab, std::move(inner), true);
}

ChatTemplate chat_template(const GgufVocab& vocab) {
  const auto text = [&](const std::optional<std::int32_t>& id) {
    return id ? vocab.text(*id) : std::string();
  };
  return ChatTemplate(*vocab.chat_template, {text(vocab.bos_id), text(vocab.eos_id)},
                      vocab.where("tokenizer.chat_template"));
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& file) {
  const GgufVocab vocab = GgufVocab::read(file);
  std::unique_ptr<Tokenizer> tokenizer;
  if (vocab.model == "gpt2") {
    tokenizer = byte_level_bpe(vocab);
  } else if (vocab.model == "llama") {
    tokenizer = sentencepiece_bpe(vocab);
  } else {
    fail("{}: unsupported tokenizer model \"{}\" (supported: gpt2, llama)",
         vocab.where("tokenizer.ggml.model"), vocab.model);
  }
  if (vocab.chat_template) tokenizer->set_chat_template(chat_template(vocab));
  return tokenizer;
}

}  // namespace selfspec
