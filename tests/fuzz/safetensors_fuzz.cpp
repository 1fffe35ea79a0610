// Fuzz target: the safetensors file parser (SafetensorsFile on bytes in memory). The input is a
// whole .safetensors file. It must parse or throw selfspec::Error; a parsed file's tensors must
// tile its data area, and their bytes are converted to f32 so that ASan sees any read beyond
// the input.
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "model_io/safetensors.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace {

using selfspec::fuzz::require;

void check_tensors(const selfspec::SafetensorsFile& file) {
  const std::span<const std::byte> bytes = file.bytes();
  std::uint64_t end = 0;
  for (const selfspec::TensorInfo& info : file.tensors()) {
    require(info.data_offset <= bytes.size() && info.nbytes <= bytes.size() - info.data_offset,
            "a tensor's bytes lie beyond the file");
    require(
        info.nbytes == static_cast<std::uint64_t>(info.numel()) * selfspec::dtype_size(info.dtype),
        "a tensor's byte count differs from its shape times its dtype size");
    require(end == 0 || info.data_offset == end, "tensors() are not contiguous in offset order");
    end = info.data_offset + info.nbytes;
    std::vector<float> values(static_cast<std::size_t>(info.numel()));
    if (!values.empty()) {
      selfspec::convert_dtype(info.dtype, bytes.data() + info.data_offset, selfspec::DType::kF32,
                              values.data(), values.size());
    }
  }
  require(file.tensors().empty() || end == bytes.size(), "the last tensor ends before the file");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<selfspec::SafetensorsFile> file;
  try {
    file.emplace(selfspec::fuzz::as_bytes(data, size), "fuzz.safetensors");
  } catch (const selfspec::Error&) {
    return 0;  // a clear error is the right answer to a bad file
  }
  check_tensors(*file);
  return 0;
}
