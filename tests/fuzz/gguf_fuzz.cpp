// Fuzz target: the GGUF reader (GgufFile on bytes in memory) and what loading a model reads from
// it. The input is a whole .gguf file. Parsing must succeed or throw selfspec::Error. Of a parsed
// file: every metadata value goes through every typed getter (a wrong type is a selfspec::Error);
// every tensor lies inside the input and is dequantized to f32 row by row (so ASan sees a read
// beyond it); then the architecture (model_config_from_gguf) and, when the tensors fit it, every
// weight read through GgufTensorSource as the loader reads it, whole and as a rank of TP 2 would.
#include "core/error.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/gguf_file.hpp"
#include "model_io/gguf_model_config.hpp"
#include "model_io/gguf_tensor_source.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {

using selfspec::fuzz::allowing_errors;
using selfspec::fuzz::require;

void read_metadata(const selfspec::GgufFile& file) {
  for (const auto& entry : file.metadata()) {
    const std::string& key = entry.first;  // clang 14 cannot capture structured bindings
    allowing_errors([&] { static_cast<void>(file.get_string(key)); });
    allowing_errors([&] { static_cast<void>(file.get_int(key)); });
    allowing_errors([&] { static_cast<void>(file.get_float(key)); });
    allowing_errors([&] { static_cast<void>(file.get_bool(key)); });
    allowing_errors([&] { static_cast<void>(file.get_string_array(key)); });
    allowing_errors([&] { static_cast<void>(file.get_int_array(key)); });
    allowing_errors([&] { static_cast<void>(file.get_float_array(key)); });
  }
}

void dequantize_tensors(const selfspec::GgufFile& file) {
  const std::span<const std::byte> bytes = file.bytes();
  for (const selfspec::GgufTensorInfo& info : file.tensors()) {
    require(info.offset <= bytes.size() && info.nbytes <= bytes.size() - info.offset,
            "a tensor's bytes lie beyond the file");
    require(file.contains(info.name) && &file.tensor(info.name) == &info,
            "tensor(name) does not find the tensor of that name");
    if (info.dims.size() > 2) {  // row_bytes() takes 1-D and 2-D tensors; read it whole
      std::vector<float> values(static_cast<std::size_t>(info.numel()));
      selfspec::dequantize_ggml(info.type, bytes.subspan(info.offset, info.nbytes), values);
      continue;
    }
    std::vector<float> row(static_cast<std::size_t>(info.cols()));
    for (std::int64_t r = 0; r < info.rows(); ++r) {
      selfspec::dequantize_ggml(info.type, file.row_bytes(info, r), row);
    }
  }
}

// The loader's reads: each expected weight whole, and a 2-D weight's column halves (a row-parallel
// rank of TP 2, which may cut a quantization block).
void load_weights(const selfspec::GgufFile& file, const selfspec::ModelConfig& config) {
  const selfspec::GgufTensorSource source(file, config);
  source.validate(config);
  for (const selfspec::ExpectedTensor& expected : selfspec::expected_tensors(config)) {
    if (!file.contains(selfspec::gguf_tensor_name(expected.name))) continue;
    const std::int64_t rows = expected.shape[0];
    const std::int64_t cols = expected.shape.size() == 2 ? expected.shape[1] : 0;
    std::vector<float> values(static_cast<std::size_t>(rows * std::max<std::int64_t>(cols, 1)));
    source.read(expected.name, {0, rows, 0, cols}, selfspec::DType::kF32, values.data());
    if (cols == 0) continue;
    allowing_errors([&] {
      source.read(expected.name, {0, rows, cols / 2, cols}, selfspec::DType::kBF16, values.data());
    });
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // GgufTensorSource dequantizes rows in an OpenMP loop; one thread keeps runs reproducible.
  setenv("OMP_NUM_THREADS", "1", /*overwrite=*/1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<selfspec::GgufFile> file;
  try {
    file.emplace(selfspec::fuzz::as_bytes(data, size), "fuzz.gguf");
  } catch (const selfspec::Error&) {
    return 0;  // a clear error is the right answer to a bad file
  }
  read_metadata(*file);
  dequantize_tensors(*file);
  std::optional<selfspec::ModelConfig> config;
  try {
    config = selfspec::model_config_from_gguf(*file);
  } catch (const selfspec::Error&) {
    return 0;
  }
  static_cast<void>(config->parameter_count());
  allowing_errors([&] { load_weights(*file, *config); });
  return 0;
}
