// Reading safetensors files (https://huggingface.co/docs/safetensors) and HF checkpoint
// directories (one model.safetensors, or shards listed by model.safetensors.index.json).
//
// Validation is strict and every error names the file and, where there is one, the tensor:
// header length within bounds and the file, header is a JSON object, no duplicate tensor names,
// known dtypes (F32, BF16, F16), shapes of non-negative integers, data_offsets inside the data
// area, byte count = product(shape) × dtype size, offsets contiguous with no holes or overlaps
// (sorted by offset, starting at 0, ending at the end of the file); for an index: shard file
// names without path separators, every listed shard present, every listed tensor found in its
// shard, no tensor present in two shards.
#pragma once

#include "core/dtype.hpp"
#include "model_io/mapped_file.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t data_offset = 0;  // absolute offset of the first byte in the file
  std::uint64_t nbytes = 0;
  std::size_t file_index = 0;  // which file of the checkpoint holds it
  std::int64_t numel() const;
};

// The upper bound on a safetensors JSON header (the format's own reference limit: 100 MB).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// One validated, memory-mapped .safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path, std::size_t file_index = 0);
  // Parses bytes already in memory (tests, fuzzing); `source` names them in errors. The bytes
  // must outlive the object; path() is then empty and mapping() maps nothing.
  SafetensorsFile(std::span<const std::byte> bytes, std::string source, std::size_t file_index = 0);
  const std::filesystem::path& path() const { return file_.path(); }
  // The whole file: the mapping's bytes, or those given to the in-memory constructor.
  std::span<const std::byte> bytes() const { return bytes_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const MappedFile& mapping() const { return file_; }

 private:
  void parse(const std::string& name, std::size_t file_index);
  MappedFile file_;
  std::span<const std::byte> bytes_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A rectangular part of a 1-D or 2-D tensor: rows [row_begin, row_end) × cols [col_begin, col_end)
// (for 1-D tensors only the row range is used and describes elements).
struct TensorSlice {
  std::int64_t row_begin = 0;
  std::int64_t row_end = 0;
  std::int64_t col_begin = 0;
  std::int64_t col_end = 0;
};

// A checkpoint directory: model.safetensors, or model.safetensors.index.json + shards.
// A single .safetensors file path is accepted too.
class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& path);

  const std::filesystem::path& directory() const { return directory_; }
  bool contains(std::string_view name) const;
  // Throws selfspec::Error "tensor 'X' is missing from <dir>" when absent.
  const TensorInfo& tensor(std::string_view name) const;
  std::vector<std::string> tensor_names() const;
  const std::filesystem::path& file_of(const TensorInfo& info) const;
  std::size_t file_count() const { return files_.size(); }
  std::uint64_t total_bytes() const;

  // Copies the slice of a 1-D or 2-D tensor into dst (row-major, slice-shaped), converting to
  // dst_dtype. Reads only the bytes of the slice from the mapping.
  void read(const TensorInfo& info, const TensorSlice& slice, DType dst_dtype, void* dst) const;
  // Copies a whole tensor (any rank) into dst as dst_dtype.
  void read_all(const TensorInfo& info, DType dst_dtype, void* dst) const;

 private:
  std::filesystem::path directory_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorInfo, std::less<>> tensors_;
};

}  // namespace selfspec
