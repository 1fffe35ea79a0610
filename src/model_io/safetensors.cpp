#include "model_io/safetensors.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

namespace selfspec {
namespace {

using nlohmann::json;

constexpr std::string_view kIndexFileName = "model.safetensors.index.json";
constexpr std::string_view kSingleFileName = "model.safetensors";
constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::size_t kHeaderLengthBytes = 8;

// A short description of a JSON value for error messages: its type and (truncated) text.
std::string describe(const json& value) {
  std::string text = value.dump();
  constexpr std::size_t kMaxText = 60;
  if (text.size() > kMaxText) text = text.substr(0, kMaxText) + "...";
  if (value.is_null()) return "null";
  return fmt::format("{} {}", value.type_name(), text);
}

std::string format_shape(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Parses JSON text and rejects duplicate keys in any object (nlohmann silently keeps the last one).
// `duplicate_message(path, key)` words the error; path holds the keys of the enclosing objects.
template <typename DuplicateMessage>
json parse_json_strict(std::string_view text, const std::string& source,
                       const DuplicateMessage& duplicate_message) {
  struct Frame {
    bool is_object = false;
    std::set<std::string, std::less<>> keys;
    std::string last_key;
  };
  std::vector<Frame> stack;
  const json::parser_callback_t callback = [&](int /*depth*/, json::parse_event_t event,
                                               json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        stack.push_back(Frame{true, {}, {}});
        break;
      case json::parse_event_t::array_start:
        stack.push_back(Frame{false, {}, {}});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case json::parse_event_t::key: {
        if (stack.empty() || !stack.back().is_object) break;
        const std::string& key = parsed.get_ref<const std::string&>();
        Frame& frame = stack.back();
        if (!frame.keys.insert(key).second) {
          std::vector<std::string> path;
          for (std::size_t i = 0; i + 1 < stack.size(); ++i) {
            if (stack[i].is_object) path.push_back(stack[i].last_key);
          }
          throw Error(fmt::format("{}: {}", source, duplicate_message(path, key)));
        }
        frame.last_key = key;
        break;
      }
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", source, e.what());
  }
}

std::uint64_t read_le_u64(const std::byte* data) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    value |= static_cast<std::uint64_t>(std::to_integer<std::uint8_t>(data[i])) << (8 * i);
  }
  return value;
}

// Reads a JSON value that must be a non-negative integer fitting in int64.
std::optional<std::uint64_t> as_non_negative(const json& value) {
  if (!value.is_number_unsigned()) return std::nullopt;
  return value.get<std::uint64_t>();
}

std::optional<DType> supported_dtype(std::string_view name) {
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    if (dtype_safetensors_name(dtype) == name) return dtype;
  }
  return std::nullopt;
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open for reading", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("{}: read error", path.string());
  return std::move(text).str();
}

// Shard names in an index must be plain file names in the checkpoint directory.
void check_shard_name(const std::string& shard, const std::string& tensor,
                      const std::filesystem::path& index) {
  const bool bad = shard.empty() || shard == "." || shard == ".." ||
                   shard.find("..") != std::string::npos ||
                   shard.find_first_of(std::string_view("/\\\0", 3)) != std::string::npos;
  if (bad) {
    fail(
        "{}: weight_map['{}']: shard '{}' is not a plain file name (expected e.g. "
        "'model-00001-of-00002.safetensors', without '/', '\\' or '..')",
        index.string(), tensor, shard);
  }
}

// The data area of a safetensors file: after the 8-byte header length and the JSON header.
struct DataArea {
  std::uint64_t start = 0;  // file offset
  std::uint64_t size = 0;
};

// The JSON header's length, checked against the file size and the limit.
std::uint64_t read_header_length(std::span<const std::byte> bytes, const std::string& name) {
  if (bytes.size() < kHeaderLengthBytes) {
    fail(
        "{}: file is {} bytes, too short for a safetensors file (expected at least the 8-byte "
        "header length)",
        name, bytes.size());
  }
  const std::uint64_t header_len = read_le_u64(bytes.data());
  if (header_len == 0) fail("{}: header length is 0 (expected a JSON header)", name);
  if (header_len > kMaxSafetensorsHeaderBytes) {
    fail("{}: header length {} exceeds the limit of {} bytes", name, header_len,
         kMaxSafetensorsHeaderBytes);
  }
  if (header_len > bytes.size() - kHeaderLengthBytes) {
    fail("{}: header length {} needs {} bytes but the file has only {}", name, header_len,
         kHeaderLengthBytes + header_len, bytes.size());
  }
  return header_len;
}

// The header's '__metadata__' entry: an object of strings.
void read_metadata(const json& entry, const std::string& name,
                   std::map<std::string, std::string>& metadata) {
  if (!entry.is_object()) {
    fail("{}: '__metadata__' must be an object of strings, found {}", name, describe(entry));
  }
  for (const auto& [meta_key, meta_value] : entry.items()) {
    if (!meta_value.is_string()) {
      fail("{}: '__metadata__' key '{}' must be a string, found {}", name, meta_key,
           describe(meta_value));
    }
    metadata.emplace(meta_key, meta_value.get<std::string>());
  }
}

// A tensor's shape; `numel` gets its element count, saturating: nullopt when it overflows (a
// shape with a zero dimension never does).
std::vector<std::int64_t> parse_shape(const json& shape, const std::string& key,
                                      const std::string& name,
                                      std::optional<std::uint64_t>& numel) {
  if (!shape.is_array()) {
    fail("{}: tensor '{}': 'shape' must be an array of non-negative integers, found {}", name, key,
         describe(shape));
  }
  std::vector<std::int64_t> dims;
  std::uint64_t count = 1;
  bool overflow = false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::optional<std::uint64_t> dim = as_non_negative(shape[i]);
    if (!dim || *dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail("{}: tensor '{}': shape[{}] must be a non-negative integer, found {}", name, key, i,
           describe(shape[i]));
    }
    dims.push_back(static_cast<std::int64_t>(*dim));
    if (__builtin_mul_overflow(count, *dim, &count)) overflow = true;
  }
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) {
    numel = 0;
  } else {
    numel = overflow ? std::nullopt : std::optional<std::uint64_t>(count);
  }
  return dims;
}

// [begin, end) of a tensor's 'data_offsets' within the data area.
std::pair<std::uint64_t, std::uint64_t> parse_offsets(const json& offsets, const std::string& key,
                                                      const std::string& name,
                                                      const DataArea& data) {
  std::optional<std::uint64_t> begin;
  std::optional<std::uint64_t> end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = as_non_negative(offsets[0]);
    end = as_non_negative(offsets[1]);
  }
  if (!begin || !end) {
    fail(
        "{}: tensor '{}': 'data_offsets' must be [begin, end] with non-negative integers, "
        "found {}",
        name, key, describe(offsets));
  }
  if (*begin > *end) {
    fail("{}: tensor '{}': data_offsets [{}, {}) has begin after end", name, key, *begin, *end);
  }
  if (*end > data.size) {
    fail("{}: tensor '{}': data_offsets [{}, {}) end beyond the data area of {} bytes", name, key,
         *begin, *end, data.size);
  }
  return {*begin, *end};
}

// One tensor entry of the header: {dtype, shape, data_offsets}, its bytes matching its shape.
TensorInfo parse_tensor_entry(const std::string& key, const json& entry, const std::string& name,
                              std::size_t file_index, const DataArea& data) {
  if (!entry.is_object()) {
    fail("{}: tensor '{}': entry must be an object with dtype, shape and data_offsets, found {}",
         name, key, describe(entry));
  }
  for (const char* required : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(required)) fail("{}: tensor '{}': missing '{}'", name, key, required);
  }
  TensorInfo info;
  info.name = key;
  info.file_index = file_index;

  const json& dtype = entry.at("dtype");
  if (!dtype.is_string()) {
    fail("{}: tensor '{}': 'dtype' must be a string, found {}", name, key, describe(dtype));
  }
  const auto& dtype_text = dtype.get_ref<const std::string&>();
  const std::optional<DType> parsed_dtype = supported_dtype(dtype_text);
  if (!parsed_dtype) {
    fail("{}: tensor '{}': dtype {} is not supported (F32, BF16, F16)", name, key, dtype_text);
  }
  info.dtype = *parsed_dtype;

  std::optional<std::uint64_t> numel;
  info.shape = parse_shape(entry.at("shape"), key, name, numel);
  const auto [begin, end] = parse_offsets(entry.at("data_offsets"), key, name, data);
  // An element count beyond the data area fails here.
  std::uint64_t needed = 0;
  if (!numel || __builtin_mul_overflow(*numel, dtype_size(info.dtype), &needed)) {
    fail("{}: tensor '{}': shape {} × {} is too large (data_offsets [{}, {}) hold {} bytes)", name,
         key, format_shape(info.shape), dtype_text, begin, end, end - begin);
  }
  if (needed != end - begin) {
    fail("{}: tensor '{}': data_offsets [{}, {}) hold {} bytes but shape {} × {} needs {}", name,
         key, begin, end, end - begin, format_shape(info.shape), dtype_text, needed);
  }
  info.data_offset = data.start + begin;
  info.nbytes = needed;
  return info;
}

// Contiguity: sorted by offset, the tensors must tile the data area exactly (a zero-size tensor
// comes before the tensor starting at the same offset; ties keep the header's name order).
void check_tiling(std::vector<TensorInfo>& tensors, const std::string& name, const DataArea& data) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::pair(a.data_offset, a.nbytes) < std::pair(b.data_offset, b.nbytes);
  });
  std::uint64_t expected = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& info : tensors) {
    const std::uint64_t begin = info.data_offset - data.start;
    if (begin < expected) {
      fail("{}: tensor '{}': data_offsets [{}, {}) overlap tensor '{}' which ends at {}", name,
           info.name, begin, begin + info.nbytes, previous->name, expected);
    }
    if (begin > expected) {
      fail(
          "{}: tensor '{}': data_offsets [{}, {}) leave a hole: bytes [{}, {}) of the data area "
          "belong to no tensor",
          name, info.name, begin, begin + info.nbytes, expected, begin);
    }
    expected = begin + info.nbytes;
    previous = &info;
  }
  if (expected != data.size) {
    if (previous == nullptr) {
      fail("{}: data area holds {} bytes but the header lists no tensors", name, data.size);
    }
    fail(
        "{}: the tensors end at data offset {} (last: '{}') but the data area holds {} bytes "
        "(expected the last tensor to end at the end of the file)",
        name, expected, previous->name, data.size);
  }
}

}  // namespace

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t dim : shape) n *= dim;
  return n;
}

// ---------------------------------------------------------------------------------------------
// SafetensorsFile
// ---------------------------------------------------------------------------------------------

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path, std::size_t file_index)
    : file_(path), bytes_(file_.bytes()) {
  parse(path.string(), file_index);
}

SafetensorsFile::SafetensorsFile(std::span<const std::byte> bytes, std::string source,
                                 std::size_t file_index)
    : bytes_(bytes) {
  parse(source, file_index);
}

void SafetensorsFile::parse(const std::string& name, std::size_t file_index) {
  const std::span<const std::byte> bytes = bytes_;
  const std::uint64_t header_len = read_header_length(bytes, name);
  const DataArea data{kHeaderLengthBytes + header_len,
                      bytes.size() - kHeaderLengthBytes - header_len};
  const std::string_view header_text(
      reinterpret_cast<const char*>(bytes.data()) + kHeaderLengthBytes, header_len);
  const json header = parse_json_strict(
      header_text, name, [](const std::vector<std::string>& enclosing, const std::string& key) {
        if (enclosing.empty()) return fmt::format("duplicate tensor name '{}' in the header", key);
        return fmt::format("duplicate key '{}' in the header entry '{}'", key, enclosing.front());
      });
  if (!header.is_object())
    fail("{}: header must be a JSON object, found {}", name, describe(header));

  for (const auto& [key, entry] : header.items()) {
    if (key == kMetadataKey) {
      read_metadata(entry, name, metadata_);
    } else {
      tensors_.push_back(parse_tensor_entry(key, entry, name, file_index, data));
    }
  }
  // tensors() keeps the offset order check_tiling sorts into.
  check_tiling(tensors_, name, data);
}

// ---------------------------------------------------------------------------------------------
// Checkpoint
// ---------------------------------------------------------------------------------------------

namespace {

struct IndexContents {
  // tensor name -> shard file name
  std::map<std::string, std::string, std::less<>> weight_map;
  // shard names, sorted
  std::vector<std::string> shards;
};

IndexContents parse_index(const std::filesystem::path& index_path) {
  const std::string source = index_path.string();
  const std::string text = read_text_file(index_path);
  const json index = parse_json_strict(
      text, source, [](const std::vector<std::string>& enclosing, const std::string& key) {
        if (enclosing.size() == 1 && enclosing.front() == "weight_map") {
          return fmt::format("tensor '{}' is listed twice in 'weight_map'", key);
        }
        return fmt::format(
            "duplicate key '{}'{}", key,
            enclosing.empty() ? std::string() : fmt::format(" in '{}'", enclosing.front()));
      });
  if (!index.is_object()) fail("{}: expected a JSON object, found {}", source, describe(index));
  const auto found = index.find("weight_map");
  if (found == index.end()) fail("{}: missing the 'weight_map' object", source);
  if (!found->is_object()) {
    fail("{}: 'weight_map' must be an object of tensor name -> shard file, found {}", source,
         describe(*found));
  }
  if (const auto metadata = index.find("metadata");
      metadata != index.end() && !metadata->is_object() && !metadata->is_null()) {
    fail("{}: 'metadata' must be an object, found {}", source, describe(*metadata));
  }
  IndexContents contents;
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : found->items()) {
    if (!shard.is_string()) {
      fail("{}: weight_map['{}'] must be a shard file name string, found {}", source, tensor,
           describe(shard));
    }
    const auto& shard_name = shard.get_ref<const std::string&>();
    check_shard_name(shard_name, tensor, index_path);
    contents.weight_map.emplace(tensor, shard_name);
    shards.insert(shard_name);
  }
  contents.shards.assign(shards.begin(), shards.end());
  return contents;
}

bool is_index_file(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  constexpr std::string_view kSuffix = ".safetensors.index.json";
  return name.size() >= kSuffix.size() &&
         std::string_view(name).substr(name.size() - kSuffix.size()) == kSuffix;
}

}  // namespace

Checkpoint Checkpoint::open(const std::filesystem::path& path) {
  Checkpoint checkpoint;
  std::error_code ec;
  std::optional<std::filesystem::path> index_path;
  std::optional<std::filesystem::path> single_path;
  if (std::filesystem::is_directory(path, ec)) {
    checkpoint.directory_ = path;
    const std::filesystem::path index = path / kIndexFileName;
    const std::filesystem::path single = path / kSingleFileName;
    if (std::filesystem::exists(index, ec)) {
      index_path = index;
    } else if (std::filesystem::exists(single, ec)) {
      single_path = single;
    } else {
      fail("{}: no checkpoint found in this directory: looked for {} and {}", path.string(),
           kIndexFileName, kSingleFileName);
    }
  } else if (std::filesystem::exists(path, ec)) {
    checkpoint.directory_ =
        path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
    if (is_index_file(path)) {
      index_path = path;
    } else if (path.extension() == ".safetensors") {
      single_path = path;
    } else {
      fail(
          "{}: expected a checkpoint directory, a .safetensors file or a "
          "*.safetensors.index.json file",
          path.string());
    }
  } else {
    fail(
        "{}: checkpoint path does not exist (expected a directory with {} or {}, or a "
        ".safetensors file)",
        path.string(), kIndexFileName, kSingleFileName);
  }

  if (single_path) {
    checkpoint.files_.push_back(std::make_unique<SafetensorsFile>(*single_path, 0));
    for (const TensorInfo& info : checkpoint.files_.back()->tensors()) {
      checkpoint.tensors_.emplace(info.name, info);
    }
    return checkpoint;
  }

  const std::string index_name = index_path->string();
  const IndexContents index = parse_index(*index_path);
  const std::filesystem::path shard_dir = index_path->parent_path();
  for (std::size_t i = 0; i < index.shards.size(); ++i) {
    const std::string& shard = index.shards[i];
    const std::filesystem::path shard_path = shard_dir / shard;
    if (!std::filesystem::exists(shard_path, ec)) {
      const auto listed = std::find_if(index.weight_map.begin(), index.weight_map.end(),
                                       [&](const auto& item) { return item.second == shard; });
      fail("{}: shard '{}' (listed for tensor '{}') does not exist: {} not found", index_name,
           shard, listed->first, shard_path.string());
    }
    checkpoint.files_.push_back(std::make_unique<SafetensorsFile>(shard_path, i));
    const SafetensorsFile& file = *checkpoint.files_.back();
    for (const TensorInfo& info : file.tensors()) {
      if (const auto seen = checkpoint.tensors_.find(info.name);
          seen != checkpoint.tensors_.end()) {
        fail("{}: tensor '{}' is present in two shards: {} and {}", index_name, info.name,
             checkpoint.files_[seen->second.file_index]->path().string(), shard_path.string());
      }
      const auto mapped = index.weight_map.find(info.name);
      if (mapped == index.weight_map.end()) {
        fail("{}: tensor '{}' is present in the shard but absent from the weight_map of {}",
             shard_path.string(), info.name, index_name);
      }
      if (mapped->second != shard) {
        fail("{}: tensor '{}' is present in the shard but {} maps it to '{}'", shard_path.string(),
             info.name, index_name, mapped->second);
      }
      checkpoint.tensors_.emplace(info.name, info);
    }
  }
  for (const auto& [tensor, shard] : index.weight_map) {
    if (!checkpoint.tensors_.contains(tensor)) {
      fail("{}: tensor '{}' is mapped to shard '{}' but {} does not contain it", index_name, tensor,
           shard, (shard_dir / shard).string());
    }
  }
  return checkpoint;
}

bool Checkpoint::contains(std::string_view name) const {
  return tensors_.find(name) != tensors_.end();
}

const TensorInfo& Checkpoint::tensor(std::string_view name) const {
  const auto found = tensors_.find(name);
  if (found == tensors_.end()) fail("tensor '{}' is missing from {}", name, directory_.string());
  return found->second;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) names.push_back(name);
  return names;
}

const std::filesystem::path& Checkpoint::file_of(const TensorInfo& info) const {
  SELFSPEC_CHECK(info.file_index < files_.size(),
                 "tensor '{}': file index {} is out of range for checkpoint {} with {} files",
                 info.name, info.file_index, directory_.string(), files_.size());
  return files_[info.file_index]->path();
}

std::uint64_t Checkpoint::total_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [name, info] : tensors_) total += info.nbytes;
  return total;
}

namespace {

// Checks that `info` describes a tensor of this checkpoint (not a stale copy from another one).
const TensorInfo& checked_info(const std::map<std::string, TensorInfo, std::less<>>& tensors,
                               const TensorInfo& info, const std::filesystem::path& directory) {
  const auto found = tensors.find(info.name);
  if (found == tensors.end()) fail("tensor '{}' is missing from {}", info.name, directory.string());
  const TensorInfo& own = found->second;
  SELFSPEC_CHECK(own.file_index == info.file_index && own.data_offset == info.data_offset &&
                     own.nbytes == info.nbytes && own.dtype == info.dtype &&
                     own.shape == info.shape,
                 "tensor '{}': the TensorInfo passed does not match the one in checkpoint {}",
                 info.name, directory.string());
  return own;
}

}  // namespace

void Checkpoint::read(const TensorInfo& info, const TensorSlice& slice, DType dst_dtype,
                      void* dst) const {
  const TensorInfo& own = checked_info(tensors_, info, directory_);
  const std::string file = file_of(own).string();
  const std::size_t rank = own.shape.size();
  if (rank != 1 && rank != 2) {
    fail("{}: tensor '{}' has shape {} (rank {}); read() takes 1-D or 2-D tensors (use read_all)",
         file, own.name, format_shape(own.shape), rank);
  }
  const std::int64_t rows = own.shape[0];
  const std::int64_t cols = rank == 2 ? own.shape[1] : 1;
  const std::int64_t col_begin = rank == 2 ? slice.col_begin : 0;
  const std::int64_t col_end = rank == 2 ? slice.col_end : 1;
  const bool rows_ok =
      0 <= slice.row_begin && slice.row_begin <= slice.row_end && slice.row_end <= rows;
  const bool cols_ok = 0 <= col_begin && col_begin <= col_end && col_end <= cols;
  if (!rows_ok || !cols_ok) {
    if (rank == 1) {
      fail("{}: tensor '{}' with shape {}: slice [{}, {}) is outside the tensor", file, own.name,
           format_shape(own.shape), slice.row_begin, slice.row_end);
    }
    fail("{}: tensor '{}' with shape {}: slice rows [{}, {}) × cols [{}, {}) is outside the tensor",
         file, own.name, format_shape(own.shape), slice.row_begin, slice.row_end, slice.col_begin,
         slice.col_end);
  }
  const std::int64_t slice_rows = slice.row_end - slice.row_begin;
  const std::int64_t slice_cols = col_end - col_begin;
  if (slice_rows == 0 || slice_cols == 0) return;
  SELFSPEC_CHECK(dst != nullptr, "{}: tensor '{}': read() into a null destination", file, own.name);

  const std::size_t src_elem = dtype_size(own.dtype);
  const std::size_t dst_elem = dtype_size(dst_dtype);
  const std::byte* base = files_[own.file_index]->bytes().data() + own.data_offset;
  auto* out = static_cast<std::byte*>(dst);
  if (slice_cols == cols) {  // whole rows: one contiguous run
    const auto first = static_cast<std::size_t>(slice.row_begin * cols);
    convert_dtype(own.dtype, base + first * src_elem, dst_dtype, out,
                  static_cast<std::size_t>(slice_rows * cols));
    return;
  }
  for (std::int64_t r = 0; r < slice_rows; ++r) {
    const auto first = static_cast<std::size_t>((slice.row_begin + r) * cols + col_begin);
    convert_dtype(own.dtype, base + first * src_elem, dst_dtype,
                  out + static_cast<std::size_t>(r * slice_cols) * dst_elem,
                  static_cast<std::size_t>(slice_cols));
  }
}

void Checkpoint::read_all(const TensorInfo& info, DType dst_dtype, void* dst) const {
  const TensorInfo& own = checked_info(tensors_, info, directory_);
  const auto numel = static_cast<std::size_t>(own.numel());
  if (numel == 0) return;
  SELFSPEC_CHECK(dst != nullptr, "{}: tensor '{}': read_all() into a null destination",
                 file_of(own).string(), own.name);
  const std::byte* base = files_[own.file_index]->bytes().data() + own.data_offset;
  convert_dtype(own.dtype, base, dst_dtype, dst, numel);
}

}  // namespace selfspec
