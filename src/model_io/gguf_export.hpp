// Writing a LLaMA-family model as a GGUF file, the way llama.cpp's converter lays it out: the
// `general.architecture` and `<arch>.*` geometry keys, tensors under GGUF names with dims in ggml
// order, and Q/K rows of `llama` models permuted for ggml's RoPE (the inverse of what
// GgufTensorSource undoes). 2-D weights are stored as F32, F16, BF16 or one of the quantized types
// quantize_ggml writes (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K: each row quantized whole,
// after the Q/K permutation); norms and biases always as F32. A matrix whose rows are not whole
// blocks of the requested type falls back as llama.cpp's quantize does: Q4_K -> Q5_0, Q5_K ->
// Q5_1, Q6_K -> Q8_0 (blocks of 32), and F16 when the rows are not whole blocks of 32 either (one
// warning lists them). Used by `selfspec make-model --gguf [--gguf-type]` and by the tests,
// which check that a model read back from its GGUF equals the checkpoint it came from, and make
// small quantized models for the native quantized kernels.
#pragma once

#include "kernels/cpu/ggml_dequantize.hpp"
#include "model_io/gguf_writer.hpp"
#include "model_io/model_config.hpp"
#include "model_io/tensor_source.hpp"

#include <filesystem>

namespace selfspec {

// The metadata and tensors of `config`'s model read from `source`, into `writer` (tokenizer
// metadata, if any, is the caller's to add). `matrix_type` is the type of the 2-D weights (the
// embedding and LM head included); throws selfspec::Error for a type quantize_ggml does not write.
void add_model_to_gguf(GgufWriter& writer, const TensorSource& source, const ModelConfig& config,
                       GgmlType matrix_type = GgmlType::kF32);

// add_model_to_gguf into a new file.
void export_gguf(const TensorSource& source, const ModelConfig& config,
                 const std::filesystem::path& path, GgmlType matrix_type = GgmlType::kF32);

}  // namespace selfspec
