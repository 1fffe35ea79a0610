// Writing a LLaMA-family model as a GGUF file, the way llama.cpp's converter lays it out: the
// `general.architecture` and `<arch>.*` geometry keys, tensors under GGUF names with dims in ggml
// order, and Q/K rows of `llama` models permuted for ggml's RoPE (the inverse of what
// GgufTensorSource undoes). 2-D weights are stored as F32, F16 or BF16 (norms and biases as F32).
// Used by `selfspec make-model --format gguf` and by the tests, which check that a model read
// back from its GGUF equals the checkpoint it came from.
#pragma once

#include "kernels/cpu/ggml_dequantize.hpp"
#include "model_io/gguf_writer.hpp"
#include "model_io/model_config.hpp"
#include "model_io/tensor_source.hpp"

#include <filesystem>

namespace selfspec {

// The metadata and tensors of `config`'s model read from `source`, into `writer` (tokenizer
// metadata, if any, is the caller's to add).
void add_model_to_gguf(GgufWriter& writer, const TensorSource& source, const ModelConfig& config,
                       GgmlType matrix_type = GgmlType::kF32);

// add_model_to_gguf into a new file.
void export_gguf(const TensorSource& source, const ModelConfig& config,
                 const std::filesystem::path& path, GgmlType matrix_type = GgmlType::kF32);

}  // namespace selfspec
