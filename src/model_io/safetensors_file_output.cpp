#include "model_io/safetensors_file_output.hpp"

#include "core/error.hpp"

#include <system_error>

namespace selfspec {

void write_safetensors_file(const SafetensorsWriter& writer, const std::filesystem::path& path) {
  const std::filesystem::path staging = path.string() + ".partial";
  std::error_code error;
  std::filesystem::remove_all(staging, error);
  const std::vector<std::filesystem::path> files = writer.write(staging);
  SELFSPEC_CHECK(files.size() == 1, "{}: expected one file, the writer made {}", path.string(),
                 files.size());
  std::filesystem::rename(files.front(), path, error);
  SELFSPEC_CHECK(!error, "{}: cannot rename {} into place: {}", path.string(),
                 files.front().string(), error.message());
  std::filesystem::remove_all(staging, error);
}

}  // namespace selfspec
