// GgufFile (see gguf_file.hpp): a bounds-checked walk over the header, the metadata and the
// tensor infos, then the checks of the tensor data layout. Hand-written because no packaged C++
// library reads GGUF (ggml's own reader is part of llama.cpp, not packaged in Debian, and aborts
// on malformed input instead of reporting it).
#include "model_io/gguf_file.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>

namespace selfspec {
namespace {

constexpr std::array<char, 4> kMagic = {'G', 'G', 'U', 'F'};
constexpr std::uint64_t kDefaultAlignment = 32;
constexpr std::uint64_t kMaxAlignment = 1u << 20;
constexpr std::uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 50;

// Sequential little-endian reads that never step past the end; errors name the source and what
// was being read.
class ByteReader {
 public:
  ByteReader(std::span<const std::byte> bytes, const std::string& source)
      : bytes_(bytes), source_(source) {}

  std::uint64_t position() const { return position_; }
  std::uint64_t remaining() const { return bytes_.size() - position_; }

  template <typename T>
  T scalar(std::string_view what) {
    require(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }

  std::string string(std::string_view what) {
    const auto length = scalar<std::uint64_t>(what);
    SELFSPEC_CHECK(length <= kMaxGgufStringBytes,
                   "{}: {} is a string of {} bytes, more than the limit of {}", source_, what,
                   length, kMaxGgufStringBytes);
    require(length, what);
    std::string text(reinterpret_cast<const char*>(bytes_.data() + position_), length);
    position_ += length;
    return text;
  }

  // Fails unless `count` items of at least `min_item_bytes` each could still fit.
  void require_items(std::uint64_t count, std::uint64_t min_item_bytes, std::string_view what) {
    SELFSPEC_CHECK(count <= remaining() / std::max<std::uint64_t>(min_item_bytes, 1),
                   "{}: {} claims {} items, more than the {} bytes left in the file could hold",
                   source_, what, count, remaining());
  }

 private:
  void require(std::uint64_t n, std::string_view what) const {
    SELFSPEC_CHECK(n <= remaining(),
                   "{}: truncated: {} needs {} bytes at offset {}, but the file has {} left",
                   source_, what, n, position_, remaining());
  }
  std::span<const std::byte> bytes_;
  const std::string& source_;
  std::uint64_t position_ = 0;
};

bool is_integer_type(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kBool:
      return true;
    default:
      return false;
  }
}

bool is_float_type(GgufValueType type) {
  return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64;
}

// The encoded size of a scalar of `type` (strings: the minimum, their length prefix).
std::uint64_t min_encoded_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    default:
      return 8;
  }
}

GgufValueType value_type(std::uint32_t raw, const std::string& source, std::string_view key) {
  SELFSPEC_CHECK(raw <= static_cast<std::uint32_t>(GgufValueType::kFloat64),
                 "{}: metadata key '{}' has unknown value type {}", source, key, raw);
  return static_cast<GgufValueType>(raw);
}

std::int64_t read_integer(ByteReader& in, GgufValueType type, const std::string& source,
                          std::string_view key) {
  switch (type) {
    case GgufValueType::kUint8:
      return in.scalar<std::uint8_t>(key);
    case GgufValueType::kInt8:
      return in.scalar<std::int8_t>(key);
    case GgufValueType::kUint16:
      return in.scalar<std::uint16_t>(key);
    case GgufValueType::kInt16:
      return in.scalar<std::int16_t>(key);
    case GgufValueType::kUint32:
      return in.scalar<std::uint32_t>(key);
    case GgufValueType::kInt32:
      return in.scalar<std::int32_t>(key);
    case GgufValueType::kInt64:
      return in.scalar<std::int64_t>(key);
    case GgufValueType::kBool: {
      const auto raw = in.scalar<std::uint8_t>(key);
      SELFSPEC_CHECK(raw <= 1, "{}: metadata key '{}' is a bool with value {} (not 0 or 1)", source,
                     key, raw);
      return raw;
    }
    default: {  // kUint64
      const auto raw = in.scalar<std::uint64_t>(key);
      SELFSPEC_CHECK(raw <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                     "{}: metadata key '{}' is a u64 of {}, beyond what selfspec reads (2^63-1)",
                     source, key, raw);
      return static_cast<std::int64_t>(raw);
    }
  }
}

double read_float(ByteReader& in, GgufValueType type, std::string_view key) {
  if (type == GgufValueType::kFloat32) return in.scalar<float>(key);
  return in.scalar<double>(key);
}

template <typename T>
std::vector<T> read_elements(std::uint64_t count, const auto& read_one) {
  std::vector<T> values;
  values.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) values.push_back(read_one());
  return values;
}

GgufValue read_array(ByteReader& in, const std::string& source, const std::string& key) {
  GgufValue value;
  value.type = GgufValueType::kArray;
  value.element_type = value_type(in.scalar<std::uint32_t>(key), source, key);
  SELFSPEC_CHECK(value.element_type != GgufValueType::kArray,
                 "{}: metadata key '{}' is an array of arrays, which no model uses (refused)",
                 source, key);
  const auto count = in.scalar<std::uint64_t>(key);
  SELFSPEC_CHECK(count <= kMaxGgufArrayCount,
                 "{}: metadata key '{}' is an array of {} elements, more than the limit of {}",
                 source, key, count, kMaxGgufArrayCount);
  in.require_items(count, min_encoded_bytes(value.element_type), "metadata key '" + key + "'");
  const GgufValueType type = value.element_type;
  if (type == GgufValueType::kString) {
    value.value = read_elements<std::string>(count, [&] { return in.string(key); });
  } else if (is_float_type(type)) {
    value.value = read_elements<double>(count, [&] { return read_float(in, type, key); });
  } else {
    value.value =
        read_elements<std::int64_t>(count, [&] { return read_integer(in, type, source, key); });
  }
  return value;
}

GgufValue read_value(ByteReader& in, GgufValueType type, const std::string& source,
                     const std::string& key) {
  if (type == GgufValueType::kArray) return read_array(in, source, key);
  GgufValue value;
  value.type = type;
  if (type == GgufValueType::kString) {
    value.value = in.string(key);
  } else if (is_float_type(type)) {
    value.value = read_float(in, type, key);
  } else {
    value.value = read_integer(in, type, source, key);
  }
  return value;
}

std::uint64_t align_up(std::uint64_t offset, std::uint64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

std::string format_dims(const std::vector<std::int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

// "F32, F16, Q4_0, ...": the types ggml_type_from_id accepts.
std::string supported_type_names() {
  std::vector<std::string_view> names;
  for (const GgmlType type : kSupportedGgmlTypes) names.push_back(ggml_type_name(type));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
  static constexpr std::array<std::string_view, 13> kNames = {
      "u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
      "bool", "string", "array", "u64", "i64", "f64"};
  const auto index = static_cast<std::size_t>(type);
  return index < kNames.size() ? kNames[index] : "unknown";
}

std::int64_t GgufTensorInfo::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  return n;
}

std::uint64_t GgufTensorInfo::row_bytes() const {
  return ggml_row_bytes(type, cols());
}

GgufFile::GgufFile(const std::filesystem::path& path) : source_(path.string()) {
  mapping_.emplace(path);
  bytes_ = mapping_->bytes();
  parse();
}

GgufFile::GgufFile(std::span<const std::byte> bytes, std::string source)
    : bytes_(bytes), source_(std::move(source)) {
  parse();
}

void GgufFile::parse() {
  ByteReader in(bytes_, source_);
  // Header.
  std::array<char, 4> magic{};
  for (char& c : magic) c = static_cast<char>(in.scalar<std::uint8_t>("the magic"));
  SELFSPEC_CHECK(magic == kMagic, "{}: not a GGUF file (the first bytes are not 'GGUF')", source_);
  version_ = in.scalar<std::uint32_t>("the version");
  SELFSPEC_CHECK(version_ == 2 || version_ == 3,
                 "{}: GGUF version {} is not supported (selfspec reads versions 2 and 3)", source_,
                 version_);
  const auto tensor_count = in.scalar<std::uint64_t>("the tensor count");
  const auto metadata_count = in.scalar<std::uint64_t>("the metadata count");
  SELFSPEC_CHECK(tensor_count <= kMaxGgufTensorCount, "{}: {} tensors, more than the limit of {}",
                 source_, tensor_count, kMaxGgufTensorCount);
  SELFSPEC_CHECK(metadata_count <= kMaxGgufMetadataCount,
                 "{}: {} metadata keys, more than the limit of {}", source_, metadata_count,
                 kMaxGgufMetadataCount);
  // Each key needs at least a length, a type and one byte of value; each tensor info at least a
  // name length, n_dims, one dim, a type and an offset.
  in.require_items(metadata_count, 8 + 4 + 1, "the metadata count");

  // Metadata.
  for (std::uint64_t i = 0; i < metadata_count; ++i) {
    std::string key = in.string(fmt::format("the key of metadata entry {}", i));
    const GgufValueType type = value_type(in.scalar<std::uint32_t>(key), source_, key);
    GgufValue value = read_value(in, type, source_, key);
    SELFSPEC_CHECK(!metadata_.contains(key), "{}: metadata key '{}' appears twice", source_, key);
    metadata_.emplace(std::move(key), std::move(value));
  }
  if (const std::optional<std::int64_t> alignment = find_int("general.alignment")) {
    SELFSPEC_CHECK(*alignment > 0 && static_cast<std::uint64_t>(*alignment) <= kMaxAlignment &&
                       std::has_single_bit(static_cast<std::uint64_t>(*alignment)),
                   "{}: general.alignment is {}, not a power of two in [1, {}]", source_,
                   *alignment, kMaxAlignment);
    alignment_ = static_cast<std::uint64_t>(*alignment);
  } else {
    alignment_ = kDefaultAlignment;
  }

  // Tensor infos.
  in.require_items(tensor_count, 8 + 4 + 8 + 4 + 8, "the tensor count");
  std::vector<std::uint64_t> relative_offsets;
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info;
    info.name = in.string(fmt::format("the name of tensor {}", i));
    const std::string what = fmt::format("tensor '{}'", info.name);
    const auto n_dims = in.scalar<std::uint32_t>(what);
    SELFSPEC_CHECK(n_dims >= 1 && n_dims <= kMaxDims, "{}: {} has {} dimensions (expected 1 to {})",
                   source_, what, n_dims, kMaxDims);
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto dim = in.scalar<std::uint64_t>(what);
      SELFSPEC_CHECK(dim >= 1 && dim <= kMaxElements && elements <= kMaxElements / dim,
                     "{}: {} has dimension {} of size {} (its element count must be in [1, 2^50])",
                     source_, what, d, dim);
      elements *= dim;
      info.dims.push_back(static_cast<std::int64_t>(dim));
    }
    const auto raw_type = in.scalar<std::uint32_t>(what);
    const std::optional<GgmlType> type = ggml_type_from_id(raw_type);
    SELFSPEC_CHECK(
        type.has_value(), "{}: {} {} has type {}, which selfspec cannot dequantize (supported: {})",
        source_, what, format_dims(info.dims), ggml_type_name(raw_type), supported_type_names());
    info.type = *type;
    const std::int64_t block = ggml_block_elements(info.type);
    SELFSPEC_CHECK(info.dims[0] % block == 0,
                   "{}: {} {} of type {}: its first dimension is not a whole number of {}-element "
                   "blocks",
                   source_, what, format_dims(info.dims), ggml_type_name(info.type), block);
    info.nbytes = info.row_bytes() * (elements / static_cast<std::uint64_t>(info.dims[0]));
    relative_offsets.push_back(in.scalar<std::uint64_t>(what));
    SELFSPEC_CHECK(!tensor_index_.contains(info.name), "{}: tensor '{}' appears twice", source_,
                   info.name);
    tensor_index_.emplace(info.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }

  // Data layout: aligned offsets inside the file, no two tensors overlapping.
  const std::uint64_t data_start = align_up(in.position(), alignment_);
  std::vector<std::size_t> order(tensors_.size());
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensorInfo& info = tensors_[i];
    const std::uint64_t relative = relative_offsets[i];
    SELFSPEC_CHECK(relative % alignment_ == 0,
                   "{}: tensor '{}' starts at data offset {}, not a multiple of the alignment {}",
                   source_, info.name, relative, alignment_);
    SELFSPEC_CHECK(data_start <= bytes_.size() && relative <= bytes_.size() - data_start &&
                       info.nbytes <= bytes_.size() - data_start - relative,
                   "{}: tensor '{}' ({} bytes at data offset {}) runs past the end of the file "
                   "({} bytes; data starts at {})",
                   source_, info.name, info.nbytes, relative, bytes_.size(), data_start);
    info.offset = data_start + relative;
    order[i] = i;
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& before = tensors_[order[k - 1]];
    const GgufTensorInfo& after = tensors_[order[k]];
    SELFSPEC_CHECK(before.offset + before.nbytes <= after.offset,
                   "{}: tensors '{}' and '{}' overlap in the file", source_, before.name,
                   after.name);
  }
}

bool GgufFile::has(std::string_view key) const {
  return metadata_.contains(key);
}

const GgufValue& GgufFile::value(std::string_view key) const {
  const auto it = metadata_.find(key);
  SELFSPEC_CHECK(it != metadata_.end(), "{}: metadata key '{}' is missing", source_, key);
  return it->second;
}

std::optional<std::string> GgufFile::find_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const GgufValue& v = value(key);
  SELFSPEC_CHECK(v.type == GgufValueType::kString, "{}: metadata key '{}' is a {}, not a string",
                 source_, key, gguf_value_type_name(v.type));
  return std::get<std::string>(v.value);
}

std::optional<std::int64_t> GgufFile::find_int(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const GgufValue& v = value(key);
  SELFSPEC_CHECK(is_integer_type(v.type) && v.type != GgufValueType::kBool,
                 "{}: metadata key '{}' is a {}, not an integer", source_, key,
                 gguf_value_type_name(v.type));
  return std::get<std::int64_t>(v.value);
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const GgufValue& v = value(key);
  if (is_float_type(v.type)) return std::get<double>(v.value);
  SELFSPEC_CHECK(is_integer_type(v.type) && v.type != GgufValueType::kBool,
                 "{}: metadata key '{}' is a {}, not a number", source_, key,
                 gguf_value_type_name(v.type));
  return static_cast<double>(std::get<std::int64_t>(v.value));
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const GgufValue& v = value(key);
  SELFSPEC_CHECK(v.type == GgufValueType::kBool, "{}: metadata key '{}' is a {}, not a bool",
                 source_, key, gguf_value_type_name(v.type));
  return std::get<std::int64_t>(v.value) != 0;
}

std::string GgufFile::get_string(std::string_view key) const {
  value(key);
  return *find_string(key);
}

std::int64_t GgufFile::get_int(std::string_view key) const {
  value(key);
  return *find_int(key);
}

double GgufFile::get_float(std::string_view key) const {
  value(key);
  return *find_float(key);
}

bool GgufFile::get_bool(std::string_view key) const {
  value(key);
  return *find_bool(key);
}

const std::vector<std::string>& GgufFile::get_string_array(std::string_view key) const {
  const GgufValue& v = value(key);
  SELFSPEC_CHECK(v.type == GgufValueType::kArray && v.element_type == GgufValueType::kString,
                 "{}: metadata key '{}' is not an array of strings", source_, key);
  return std::get<std::vector<std::string>>(v.value);
}

std::vector<std::int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue& v = value(key);
  SELFSPEC_CHECK(v.type == GgufValueType::kArray && is_integer_type(v.element_type),
                 "{}: metadata key '{}' is not an array of integers", source_, key);
  return std::get<std::vector<std::int64_t>>(v.value);
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue& v = value(key);
  SELFSPEC_CHECK(v.type == GgufValueType::kArray &&
                     (is_float_type(v.element_type) || is_integer_type(v.element_type)),
                 "{}: metadata key '{}' is not an array of numbers", source_, key);
  if (is_float_type(v.element_type)) return std::get<std::vector<double>>(v.value);
  const auto& integers = std::get<std::vector<std::int64_t>>(v.value);
  return {integers.begin(), integers.end()};
}

bool GgufFile::contains(std::string_view name) const {
  return tensor_index_.contains(name);
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  SELFSPEC_CHECK(it != tensor_index_.end(), "tensor '{}' is missing from {}", name, source_);
  return tensors_[it->second];
}

std::span<const std::byte> GgufFile::row_bytes(const GgufTensorInfo& info, std::int64_t row) const {
  SELFSPEC_CHECK(info.dims.size() <= 2 && row >= 0 && row < info.rows(),
                 "{}: row {} of tensor '{}' {} is out of range", source_, row, info.name,
                 format_dims(info.dims));
  const std::uint64_t size = info.row_bytes();
  return bytes_.subspan(info.offset + static_cast<std::uint64_t>(row) * size, size);
}

bool is_gguf_file(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;
  std::ifstream in(path, std::ios::binary);
  std::array<char, 4> magic{};
  in.read(magic.data(), magic.size());
  return in.gcount() == 4 && magic == kMagic;
}

}  // namespace selfspec
