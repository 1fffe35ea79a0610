// Writing HF-layout checkpoints: one model.safetensors, or several shards plus
// model.safetensors.index.json when a shard size limit is given. Tensors are declared first
// (name, dtype, shape) so the header can be written before the data, then each tensor's bytes are
// produced by a callback and streamed to disk: a multi-GB checkpoint never sits in memory.
#pragma once

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace selfspec {

class SafetensorsWriter {
 public:
  // Fills the bytes of one tensor (already sized: numel × dtype size), in its storage dtype.
  using FillFn = std::function<void(std::span<std::byte> out)>;

  // A fill that copies a column held in memory (its elements in the storage dtype's layout, e.g.
  // BF16 bits as std::uint16_t). `values` must outlive write().
  template <typename T>
  static FillFn copy_of(const std::vector<T>& values) {
    return [&values](std::span<std::byte> out) {
      SELFSPEC_CHECK(out.size() == values.size() * sizeof(T),
                     "safetensors writer: a column of {} bytes for a tensor of {}",
                     values.size() * sizeof(T), out.size());
      std::memcpy(out.data(), values.data(), out.size());
    };
  }

  void add(std::string name, DType dtype, std::vector<std::int64_t> shape, FillFn fill);
  void set_metadata(std::string key, std::string value);

  // Writes <dir>/model.safetensors, or, when max_shard_bytes > 0 and the tensors do not fit in one
  // shard, <dir>/model-0000i-of-0000n.safetensors + model.safetensors.index.json. Creates dir.
  // Tensors are written in the order they were added. Returns the files written.
  std::vector<std::filesystem::path> write(const std::filesystem::path& dir,
                                           std::uint64_t max_shard_bytes = 0) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    FillFn fill;
    std::uint64_t nbytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace selfspec
