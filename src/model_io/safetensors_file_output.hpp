// Writing one named .safetensors file atomically with SafetensorsWriter (whose write() produces
// <dir>/model.safetensors): the tensors go to a temporary directory beside the target, the file is
// renamed into place and the directory removed, so a reader never sees a half-written file.
#pragma once

#include "model_io/safetensors_writer.hpp"

#include <filesystem>

namespace selfspec {

// Writes `writer`'s tensors as `path` (replacing any file there). The parent directory must exist.
void write_safetensors_file(const SafetensorsWriter& writer, const std::filesystem::path& path);

}  // namespace selfspec
