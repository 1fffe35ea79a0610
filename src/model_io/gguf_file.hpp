// Reading GGUF files (llama.cpp's single-file model format, versions 2 and 3; spec:
// https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
//
// Layout: magic "GGUF", u32 version, u64 tensor count, u64 metadata count; the metadata key/value
// pairs (string key, u32 value type, value; arrays carry an element type and a u64 count); the
// tensor infos (name, u32 n_dims, u64 dims[n_dims] with dims[0] the contiguous one, u32 ggml type,
// u64 offset relative to the data area); padding to `general.alignment` (default 32); the data.
//
// Validation is strict and every error names the file and the key or tensor: magic, version,
// counts bounded by what the file could hold, every string length and array count checked against
// the bytes left before reading, known value types, no duplicate keys or tensor names, a power of
// two alignment, 1..4 dims each ≥ 1 with a product that does not overflow, tensor types selfspec
// dequantizes (kSupportedGgmlTypes: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K)
// whose first dimension is a whole number of blocks, aligned offsets, and every tensor's bytes
// inside the file without overlapping another tensor's.
#pragma once

#include "kernels/cpu/ggml_dequantize.hpp"
#include "model_io/mapped_file.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace selfspec {

// GGUF metadata value types (the numbers are the format's).
enum class GgufValueType : std::uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType type);

// One metadata value. Integers (and bools) are held as int64 (a u64 above INT64_MAX is refused at
// read time, naming the key), floats as double, strings as bytes. An array holds elements of one
// type: numbers in `numbers`/`integers`, strings in `strings` (arrays of arrays are refused).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint32;
  GgufValueType element_type = GgufValueType::kUint32;  // arrays only
  std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>, std::vector<double>,
               std::vector<std::string>>
      value;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  // ggml order: dims[0] is the contiguous (innermost) dimension. A 2-D weight W[out][in] of a
  // HuggingFace checkpoint has dims {in, out}.
  std::vector<std::int64_t> dims;
  std::uint64_t offset = 0;  // absolute offset of the first byte in the file
  std::uint64_t nbytes = 0;
  std::int64_t numel() const;
  // Rows and row length of a 1-D or 2-D tensor: cols() = dims[0], rows() = dims[1] (1 for 1-D).
  std::int64_t cols() const { return dims.empty() ? 0 : dims[0]; }
  std::int64_t rows() const { return dims.size() < 2 ? 1 : dims[1]; }
  // Bytes of one row (dims[0] elements).
  std::uint64_t row_bytes() const;
};

// Upper bounds that keep a hostile header from making us allocate without limit (far above any
// real model: LLaMA-3 has 128k tokens and about 300k merges).
inline constexpr std::uint64_t kMaxGgufMetadataCount = 1u << 20;
inline constexpr std::uint64_t kMaxGgufTensorCount = 1u << 20;
inline constexpr std::uint64_t kMaxGgufStringBytes = 1u << 26;
inline constexpr std::uint64_t kMaxGgufArrayCount = 1u << 26;

class GgufFile {
 public:
  // Maps and validates `path`. Throws selfspec::Error naming the file (and the key or tensor).
  explicit GgufFile(const std::filesystem::path& path);
  // Parses bytes already in memory (for tests and fuzzing); `source` names them in errors. The
  // bytes must outlive the object.
  GgufFile(std::span<const std::byte> bytes, std::string source);

  const std::string& source() const { return source_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::span<const std::byte> bytes() const { return bytes_; }

  // Metadata. The typed getters throw selfspec::Error naming the file and the key when the key
  // is absent or of another type; find_* return nullopt when it is absent (and still throw on a
  // wrong type). Integer getters accept every integer type (and check the range of the result);
  // float getters accept float32/float64 and integers.
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  bool has(std::string_view key) const;
  const GgufValue& value(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::optional<std::string> find_string(std::string_view key) const;
  std::optional<std::int64_t> find_int(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  // Arrays: the element type must be a string / an integer type / a numeric type.
  const std::vector<std::string>& get_string_array(std::string_view key) const;
  std::vector<std::int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;

  // Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  bool contains(std::string_view name) const;
  // Throws selfspec::Error "tensor 'X' is missing from <file>" when absent.
  const GgufTensorInfo& tensor(std::string_view name) const;
  // The raw bytes of row `row` of a 1-D or 2-D tensor (row 0 of a 1-D tensor is all of it).
  std::span<const std::byte> row_bytes(const GgufTensorInfo& info, std::int64_t row) const;

 private:
  void parse();
  std::optional<MappedFile> mapping_;
  std::span<const std::byte> bytes_;
  std::string source_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

// Whether a path names a GGUF file by its magic (false for directories and unreadable files).
bool is_gguf_file(const std::filesystem::path& path);

}  // namespace selfspec
