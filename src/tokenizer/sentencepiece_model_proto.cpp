// gguf_sentencepiece_model_proto (see sentencepiece_model_proto.hpp). The protobuf wire format is
// written by hand: Debian ships libsentencepiece without its generated protobuf classes
// (sentencepiece_model.pb.h), and the dozen fields needed take a few lines of varints and
// length-delimited fields (https://protobuf.dev/programming-guides/encoding/). Field numbers are
// those of sentencepiece_model.proto.
#include "tokenizer/sentencepiece_model_proto.hpp"

#include "core/error.hpp"
#include "tokenizer/gguf_vocab.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace selfspec {
namespace {

enum class WireType : std::uint32_t { kVarint = 0, kLengthDelimited = 2, kFixed32 = 5 };

// A protobuf message being written.
class ProtoWriter {
 public:
  void varint(std::uint32_t field, std::int64_t value) {
    tag(field, WireType::kVarint);
    raw_varint(
        static_cast<std::uint64_t>(value));  // negative int32s take ten bytes, as in protobuf
  }
  void boolean(std::uint32_t field, bool value) { varint(field, value ? 1 : 0); }
  void bytes(std::uint32_t field, std::string_view value) {
    tag(field, WireType::kLengthDelimited);
    raw_varint(value.size());
    out_.append(value);
  }
  void message(std::uint32_t field, const ProtoWriter& nested) { bytes(field, nested.out_); }
  void float32(std::uint32_t field, float value) {
    tag(field, WireType::kFixed32);
    const auto bits = std::bit_cast<std::uint32_t>(value);
    for (int shift = 0; shift < 32; shift += 8) out_.push_back(static_cast<char>(bits >> shift));
  }
  const std::string& data() const { return out_; }

 private:
  void tag(std::uint32_t field, WireType type) {
    raw_varint((static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint32_t>(type));
  }
  void raw_varint(std::uint64_t value) {
    while (value >= 0x80) {
      out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
      value >>= 7;
    }
    out_.push_back(static_cast<char>(value));
  }
  std::string out_;
};

// sentencepiece_model.proto field numbers.
namespace field {
constexpr std::uint32_t kModelPieces = 1;
constexpr std::uint32_t kModelTrainerSpec = 2;
constexpr std::uint32_t kModelNormalizerSpec = 3;
constexpr std::uint32_t kPiece = 1;
constexpr std::uint32_t kPieceScore = 2;
constexpr std::uint32_t kPieceType = 3;
constexpr std::uint32_t kTrainerModelType = 3;
constexpr std::uint32_t kTrainerVocabSize = 4;
constexpr std::uint32_t kTrainerByteFallback = 35;
constexpr std::uint32_t kTrainerUnkId = 40;
constexpr std::uint32_t kTrainerBosId = 41;
constexpr std::uint32_t kTrainerEosId = 42;
constexpr std::uint32_t kTrainerPadId = 43;
constexpr std::uint32_t kTrainerUnkPiece = 45;
constexpr std::uint32_t kTrainerBosPiece = 46;
constexpr std::uint32_t kTrainerEosPiece = 47;
constexpr std::uint32_t kTrainerPadPiece = 48;
constexpr std::uint32_t kNormalizerName = 1;
constexpr std::uint32_t kNormalizerAddDummyPrefix = 3;
constexpr std::uint32_t kNormalizerRemoveExtraWhitespaces = 4;
constexpr std::uint32_t kNormalizerEscapeWhitespaces = 5;
}  // namespace field

constexpr std::int64_t kModelTypeBpe = 2;

// ModelProto.SentencePiece.Type: GGUF's token types are the same numbers, but for 0
// (undefined), which is a normal piece.
std::int64_t piece_type(GgufTokenType type) {
  return type == GgufTokenType::kUndefined ? static_cast<std::int64_t>(GgufTokenType::kNormal)
                                           : static_cast<std::int64_t>(type);
}

void write_pieces(const GgufVocab& vocab, ProtoWriter& model) {
  for (std::int32_t id = 0; id < vocab.size(); ++id) {
    ProtoWriter piece;
    piece.bytes(field::kPiece, vocab.text(id));
    piece.float32(field::kPieceScore, vocab.scores[static_cast<std::size_t>(id)]);
    piece.varint(field::kPieceType, piece_type(vocab.type(id)));
    model.message(field::kModelPieces, piece);
  }
}

ProtoWriter trainer_spec(const GgufVocab& vocab, std::int32_t unknown_id) {
  const bool has_bytes =
      std::find(vocab.types.begin(), vocab.types.end(), GgufTokenType::kByte) != vocab.types.end();
  ProtoWriter spec;
  spec.varint(field::kTrainerModelType, kModelTypeBpe);
  spec.varint(field::kTrainerVocabSize, vocab.size());
  spec.boolean(field::kTrainerByteFallback, has_bytes);
  spec.varint(field::kTrainerUnkId, unknown_id);
  spec.bytes(field::kTrainerUnkPiece, vocab.text(unknown_id));
  spec.varint(field::kTrainerBosId, vocab.bos_id.value_or(-1));
  if (vocab.bos_id) spec.bytes(field::kTrainerBosPiece, vocab.text(*vocab.bos_id));
  spec.varint(field::kTrainerEosId, vocab.eos_id.value_or(-1));
  if (vocab.eos_id) spec.bytes(field::kTrainerEosPiece, vocab.text(*vocab.eos_id));
  spec.varint(field::kTrainerPadId, vocab.padding_id.value_or(-1));
  if (vocab.padding_id) spec.bytes(field::kTrainerPadPiece, vocab.text(*vocab.padding_id));
  return spec;
}

ProtoWriter normalizer_spec(const GgufVocab& vocab) {
  ProtoWriter spec;
  spec.bytes(field::kNormalizerName, "identity");
  spec.boolean(field::kNormalizerAddDummyPrefix, vocab.add_space_prefix);
  spec.boolean(field::kNormalizerRemoveExtraWhitespaces, vocab.remove_extra_whitespaces);
  spec.boolean(field::kNormalizerEscapeWhitespaces, true);
  return spec;
}

// The one token of type "unknown", which SentencePiece requires.
std::int32_t unknown_token(const GgufVocab& vocab) {
  std::optional<std::int32_t> found;
  for (std::int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.type(id) != GgufTokenType::kUnknown) continue;
    SELFSPEC_CHECK(!found, "{}: tokens {} and {} are both of type unknown (2)",
                   vocab.where("tokenizer.ggml.token_type"), *found, id);
    found = id;
  }
  SELFSPEC_CHECK(found.has_value(),
                 "{}: no token of type unknown (2), which a SentencePiece (\"llama\") vocabulary "
                 "needs",
                 vocab.where("tokenizer.ggml.token_type"));
  return *found;
}

}  // namespace

std::string gguf_sentencepiece_model_proto(const GgufVocab& vocab) {
  SELFSPEC_CHECK(!vocab.scores.empty(),
                 "{}: missing (a SentencePiece (\"llama\") vocabulary needs token scores)",
                 vocab.where("tokenizer.ggml.scores"));
  const std::int32_t unknown_id = unknown_token(vocab);
  ProtoWriter model;
  write_pieces(vocab, model);
  model.message(field::kModelTrainerSpec, trainer_spec(vocab, unknown_id));
  model.message(field::kModelNormalizerSpec, normalizer_spec(vocab));
  return model.data();
}

}  // namespace selfspec
