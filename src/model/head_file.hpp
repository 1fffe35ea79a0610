// What the loaders of trained draft heads (model/exit_head.hpp, model/feature_head.hpp) share
// about their single .safetensors file: its metadata fields and its tensors' shapes, each error
// naming the kind of head, the file and the field or tensor.
#pragma once

#include "model_io/safetensors.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

struct HeadFile {
  std::string_view kind;  // "exit head", "feature head": how errors name the file
  std::filesystem::path path;
  std::map<std::string, std::string> metadata;

  // Throws unless `key` is present.
  std::string field(const std::string& key) const;
  // Throws unless `key` is present and a whole decimal integer.
  std::int64_t integer(const std::string& key) const;
  // Throws unless metadata "format" is `format`.
  void check_format(std::string_view format) const;
  // Throws unless `checkpoint` (this file) holds tensor `name` with shape `shape`.
  void check_tensor(const Checkpoint& checkpoint, const std::string& name,
                    const std::vector<std::int64_t>& shape) const;
};

// The file's metadata (SafetensorsFile), as a HeadFile of `kind`.
HeadFile read_head_file(std::string_view kind, const std::filesystem::path& path);

}  // namespace selfspec
