// SentencePieceTokenizer (see sentencepiece_tokenizer.hpp): wraps
// sentencepiece::SentencePieceProcessor. encode() is SentencePieceProcessor::Encode plus BOS
// like HF LlamaTokenizer(add_bos_token=True); decode() is DecodeIds (control pieces rendered as
// their text unless skipped, HF skip_special_tokens semantics for the skipping).
#include "tokenizer/sentencepiece_tokenizer.hpp"

#include "core/error.hpp"
#include "tokenizer/sentencepiece_model_check.hpp"

#include <sentencepiece_processor.h>

#include <exception>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

namespace selfspec {
namespace {

std::string read_model_file(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    fail("{}: no such SentencePiece model file", file.string());
  }
  std::ifstream in(file, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in || in.bad()) fail("{}: cannot read the SentencePiece model file", file.string());
  return std::move(bytes).str();
}

// Loads a serialized model into `processor` after the checks libsentencepiece does not make
// (sentencepiece_model_check.hpp). libsentencepiece reports most bad models in its status but
// throws for some (darts-clone refuses an empty piece): both become selfspec::Error.
void load_model(sentencepiece::SentencePieceProcessor& processor, std::string_view bytes,
                const std::string& source) {
  check_sentencepiece_model(bytes, source);
  sentencepiece::util::Status status;
  try {
    status = processor.LoadFromSerializedProto(bytes);
  } catch (const std::exception& e) {
    fail("{}: not a valid SentencePiece model: {}", source, e.what());
  }
  if (!status.ok()) {
    fail("{}: not a valid SentencePiece model: {}", source, status.ToString());
  }
  SELFSPEC_CHECK(processor.GetPieceSize() > 0, "{}: SentencePiece model has no pieces", source);
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& file)
    : source_(file.string()),
      processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  load_model(*processor_, read_model_file(file), source_);
}

SentencePieceTokenizer::SentencePieceTokenizer(SerializedModel model)
    : source_(model.source), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  load_model(*processor_, model.bytes, source_);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<std::int32_t> SentencePieceTokenizer::encode(std::string_view text,
                                                         bool add_special_tokens) const {
  std::vector<int> pieces;
  const auto status = processor_->Encode(text, &pieces);
  if (!status.ok()) {
    fail("{}: SentencePiece encode failed: {}", source_, status.ToString());
  }
  std::vector<std::int32_t> ids;
  ids.reserve(pieces.size() + 1);
  if (add_special_tokens && processor_->bos_id() >= 0) ids.push_back(processor_->bos_id());
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  return ids;
}

std::string SentencePieceTokenizer::decode(std::span<const std::int32_t> ids,
                                           bool skip_special_tokens) const {
  const int size = processor_->GetPieceSize();
  std::vector<int> kept;
  kept.reserve(ids.size());
  bool has_control = false;
  for (const std::int32_t id : ids) {
    if (id < 0 || id >= size) continue;
    if (skip_special_tokens && (processor_->IsControl(id) || processor_->IsUnknown(id))) continue;
    has_control = has_control || processor_->IsControl(id);
    kept.push_back(id);
  }
  if (!has_control) {
    std::string text;
    const auto status = processor_->Decode(kept, &text);
    if (!status.ok()) {
      fail("{}: SentencePiece decode failed: {}", source_, status.ToString());
    }
    return text;
  }
  // Control pieces have an empty surface in SentencePiece's decode; show their text instead.
  const sentencepiece::ImmutableSentencePieceText spt = processor_->DecodeIdsAsImmutableProto(kept);
  std::string text;
  for (std::size_t i = 0; i < spt.pieces_size(); ++i) {
    const auto piece = spt.pieces(static_cast<int>(i));
    const auto id = static_cast<int>(piece.id());
    text += processor_->IsControl(id) ? processor_->IdToPiece(id) : piece.surface();
  }
  return text;
}

std::int32_t SentencePieceTokenizer::vocab_size() const {
  return processor_->GetPieceSize();
}

std::optional<std::int32_t> SentencePieceTokenizer::bos_id() const {
  const int id = processor_->bos_id();
  return id >= 0 ? std::optional<std::int32_t>(id) : std::nullopt;
}

std::vector<std::int32_t> SentencePieceTokenizer::eos_ids() const {
  const int id = processor_->eos_id();
  if (id < 0) return {};
  return {id};
}

}  // namespace selfspec
