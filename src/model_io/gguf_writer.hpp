// Writing GGUF files (version 3): metadata of any GGUF value type and tensors whose bytes are
// already in their ggml layout. Used by `selfspec make-model --gguf`, by the tests (small
// GGUF models and tokenizers made on the fly) and for the fuzzers' seed corpus; GgufFile reads
// everything it writes.
#pragma once

#include "kernels/cpu/ggml_dequantize.hpp"
#include "model_io/gguf_file.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace selfspec {

class GgufWriter {
 public:
  // An alignment other than GGUF's default 32 is recorded as general.alignment.
  explicit GgufWriter(std::uint64_t alignment = 32);

  // Metadata, in insertion order (a key set twice keeps its first place and takes the new value).
  void set(const std::string& key, GgufValue value);
  void set_string(const std::string& key, std::string value);
  void set_u32(const std::string& key, std::uint32_t value);
  void set_i32(const std::string& key, std::int32_t value);
  void set_f32(const std::string& key, float value);
  void set_bool(const std::string& key, bool value);
  void set_string_array(const std::string& key, std::vector<std::string> values);
  // Integer arrays are written with `element_type` (an integer type; values are range-checked).
  void set_int_array(const std::string& key, std::vector<std::int64_t> values,
                     GgufValueType element_type = GgufValueType::kInt32);
  void set_f32_array(const std::string& key, std::vector<double> values);

  // A tensor in ggml dims order (dims[0] contiguous) whose bytes are already laid out for `type`.
  void add_tensor(const std::string& name, GgmlType type, std::vector<std::int64_t> dims,
                  std::vector<std::byte> data);
  // An F32 tensor from floats, and an F16/BF16 one converted from floats.
  void add_f32_tensor(const std::string& name, std::vector<std::int64_t> dims,
                      std::span<const float> values, GgmlType type = GgmlType::kF32);

  std::vector<std::byte> to_bytes() const;
  // Writes to_bytes() to `path`; throws selfspec::Error naming it on failure.
  void write(const std::filesystem::path& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<std::int64_t> dims;
    std::vector<std::byte> data;
  };
  std::uint64_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace selfspec
