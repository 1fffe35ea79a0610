#include "model/head_file.hpp"

#include "core/error.hpp"

#include <charconv>

namespace selfspec {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace

std::string HeadFile::field(const std::string& key) const {
  const auto it = metadata.find(key);
  SELFSPEC_CHECK(it != metadata.end(), "{} {}: the metadata has no '{}'", kind, path.string(), key);
  return it->second;
}

std::int64_t HeadFile::integer(const std::string& key) const {
  const std::string text = field(key);
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  SELFSPEC_CHECK(error == std::errc{} && end == text.data() + text.size(),
                 "{} {}: metadata '{}' = '{}' is not an integer", kind, path.string(), key, text);
  return value;
}

void HeadFile::check_format(std::string_view format) const {
  const std::string given = field("format");
  SELFSPEC_CHECK(given == format, "{} {}: metadata format is '{}', expected '{}'", kind,
                 path.string(), given, format);
}

void HeadFile::check_tensor(const Checkpoint& checkpoint, const std::string& name,
                            const std::vector<std::int64_t>& shape) const {
  SELFSPEC_CHECK(checkpoint.contains(name), "{} {}: tensor '{}' is missing", kind, path.string(),
                 name);
  const TensorInfo& tensor = checkpoint.tensor(name);
  SELFSPEC_CHECK(tensor.shape == shape, "{} {}: tensor '{}' has shape {}, expected {}", kind,
                 path.string(), name, shape_text(tensor.shape), shape_text(shape));
}

HeadFile read_head_file(std::string_view kind, const std::filesystem::path& path) {
  const SafetensorsFile file(path);
  return {kind, path, file.metadata()};
}

}  // namespace selfspec
