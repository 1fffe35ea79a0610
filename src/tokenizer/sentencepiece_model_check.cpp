// check_sentencepiece_model (see sentencepiece_model_check.hpp).
//
// The protobuf wire format is read by hand: Debian's libsentencepiece installs no generated
// ModelProto header, and two nested bytes fields are all this needs (sentencepiece_model.proto:
// ModelProto.normalizer_spec = 3, ModelProto.denormalizer_spec = 5,
// NormalizerSpec.precompiled_charsmap = 2). The character map's layout and the walk follow
// libsentencepiece's Normalizer (DecodePrecompiledCharsMap, NormalizePrefix) and darts-clone's
// DoubleArray::commonPrefixSearch: <u32 trie bytes><trie: u32 units><replacement strings>.
#include "tokenizer/sentencepiece_model_check.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace selfspec {
namespace {

constexpr std::uint32_t kNormalizerSpecField = 3;
constexpr std::uint32_t kDenormalizerSpecField = 5;
constexpr std::uint32_t kPrecompiledCharsmapField = 2;

// ---------------------------------------------------------------------------------------------
// Protobuf wire format: the fields of one message, in order.
// ---------------------------------------------------------------------------------------------
enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct ProtoField {
  std::uint32_t number = 0;
  std::uint32_t wire_type = kVarint;
  std::string_view payload;  // length-delimited fields only
};

class ProtoReader {
 public:
  ProtoReader(std::string_view message, std::string_view source, std::string_view what)
      : message_(message), source_(source), what_(what) {}

  bool done() const { return pos_ == message_.size(); }

  ProtoField next() {
    const std::uint64_t key = varint();
    ProtoField field;
    field.number = static_cast<std::uint32_t>(key >> 3);
    field.wire_type = static_cast<std::uint32_t>(key & 7);
    switch (field.wire_type) {
      case kVarint:
        varint();
        break;
      case kFixed64:
        skip(8);
        break;
      case kFixed32:
        skip(4);
        break;
      case kLengthDelimited: {
        const std::uint64_t length = varint();
        const std::size_t start = pos_;
        skip(length);
        field.payload = message_.substr(start, static_cast<std::size_t>(length));
        break;
      }
      default:
        malformed(fmt::format("field {} has wire type {}", field.number, field.wire_type));
    }
    return field;
  }

 private:
  [[noreturn]] void malformed(const std::string& reason) const {
    fail(
        "{}: not a valid SentencePiece model: malformed protobuf in {} at byte "
        "{}: {}",
        source_, what_, pos_, reason);
  }

  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) malformed("a varint runs past the end");
      const auto byte = static_cast<std::uint8_t>(message_[pos_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    malformed("a varint is longer than 10 bytes");
  }

  void skip(std::uint64_t bytes) {
    if (bytes > message_.size() - pos_) {
      malformed(fmt::format("a field of {} bytes runs past the end ({} left)", bytes,
                            message_.size() - pos_));
    }
    pos_ += static_cast<std::size_t>(bytes);
  }

  std::string_view message_;
  std::string_view source_;
  std::string_view what_;
  std::size_t pos_ = 0;
};

// The precompiled_charsmap the parsed model ends up with in the NormalizerSpec field
// `spec_field`: protobuf merges the occurrences of a message field, and the last occurrence of a
// bytes field wins.
std::optional<std::string_view> effective_charsmap(std::string_view model, std::uint32_t spec_field,
                                                   std::string_view source,
                                                   std::string_view spec_name) {
  std::optional<std::string_view> charsmap;
  ProtoReader reader(model, source, "ModelProto");
  while (!reader.done()) {
    const ProtoField field = reader.next();
    if (field.number != spec_field || field.wire_type != kLengthDelimited) continue;
    ProtoReader spec(field.payload, source, spec_name);
    while (!spec.done()) {
      const ProtoField spec_item = spec.next();
      if (spec_item.number == kPrecompiledCharsmapField &&
          spec_item.wire_type == kLengthDelimited) {
        charsmap = spec_item.payload;
      }
    }
  }
  return charsmap;
}

// ---------------------------------------------------------------------------------------------
// The precompiled character map: a darts-clone double array and the strings its leaves name.
// ---------------------------------------------------------------------------------------------
class CharsMap {
 public:
  CharsMap(std::string_view blob, std::string_view source, std::string_view name)
      : source_(source), name_(name) {
    constexpr std::size_t kSizeBytes = 4;
    if (blob.size() <= kSizeBytes) invalid(fmt::format("{} bytes is too short", blob.size()));
    const std::uint32_t trie_bytes = read_u32(blob.data());
    if (trie_bytes > blob.size() - kSizeBytes) {
      invalid(fmt::format("its trie of {} bytes runs past the map's {} bytes", trie_bytes,
                          blob.size()));
    }
    trie_ = blob.substr(kSizeBytes, trie_bytes);
    units_ = trie_bytes / 4;
    strings_ = blob.substr(kSizeBytes + trie_bytes);
    if (units_ == 0) invalid("its trie is empty");
  }

  // Every node an input's bytes could reach (from the root, one byte label per step), each
  // visited once: each child block must lie in the trie and each leaf's string in the map.
  void check() const {
    std::vector<bool> visited(units_, false);
    std::vector<std::size_t> pending = {checked_base(0, unit(0))};
    while (!pending.empty()) {
      const std::size_t base = pending.back();
      pending.pop_back();
      if (visited[base]) continue;
      visited[base] = true;
      for (std::uint32_t label = 0; label < 256; ++label) {
        const std::size_t position = base ^ label;
        const std::uint32_t child = unit(position);
        if ((child & kLabelMask) != label) continue;  // no edge with this byte
        const std::size_t child_base = checked_base(position, child);
        if (((child >> 8) & 1) != 0) check_leaf(position, unit(child_base) & kValueMask);
        pending.push_back(child_base);
      }
    }
  }

 private:
  static constexpr std::uint32_t kLabelMask = (1U << 31) | 0xFF;
  static constexpr std::uint32_t kValueMask = (1U << 31) - 1;

  static std::uint32_t read_u32(const char* bytes) {
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      value |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[i])) << (8 * i);
    }
    return value;
  }

  std::uint32_t unit(std::size_t index) const { return read_u32(trie_.data() + 4 * index); }

  // The base of the node at `position` (darts-clone's offset), whose 256 children must all lie
  // in the trie: a lookup XORs the next input byte into it and reads the unit there.
  std::size_t checked_base(std::size_t position, std::uint32_t node) const {
    const std::uint64_t offset = static_cast<std::uint64_t>(node >> 10)
                                 << ((node & (1U << 9)) >> 6);
    const std::uint64_t base = position ^ offset;
    if ((base | 0xFF) >= units_) {
      invalid(fmt::format("trie unit {} points to units [{}, {}], beyond the trie's {} units",
                          position, base & ~std::uint64_t{0xFF}, base | 0xFF, units_));
    }
    return static_cast<std::size_t>(base);
  }

  // A leaf's value is the offset of its NUL-terminated replacement string.
  void check_leaf(std::size_t position, std::uint32_t offset) const {
    if (offset >= strings_.size() ||
        std::memchr(strings_.data() + offset, '\0', strings_.size() - offset) == nullptr) {
      invalid(fmt::format(
          "trie unit {} names a replacement string at offset {} that does not end (NUL) within "
          "the {} bytes of strings",
          position, offset, strings_.size()));
    }
  }

  [[noreturn]] void invalid(const std::string& reason) const {
    fail(
        "{}: not a valid SentencePiece model: {}.precompiled_charsmap is "
        "corrupt: {}",
        source_, name_, reason);
  }

  std::string_view source_;
  std::string_view name_;
  std::string_view trie_;
  std::size_t units_ = 0;
  std::string_view strings_;
};

}  // namespace

void check_sentencepiece_model(std::string_view serialized, std::string_view source) {
  for (const auto& [field, name] : {std::pair{kNormalizerSpecField, "normalizer_spec"},
                                    std::pair{kDenormalizerSpecField, "denormalizer_spec"}}) {
    const std::optional<std::string_view> charsmap =
        effective_charsmap(serialized, field, source, name);
    // An empty map means no rules (libsentencepiece then builds no trie).
    if (charsmap && !charsmap->empty()) CharsMap(*charsmap, source, name).check();
  }
}

}  // namespace selfspec
