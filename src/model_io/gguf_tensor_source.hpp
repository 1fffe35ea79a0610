// A GGUF file as a TensorSource: the HuggingFace tensor names the loader asks for map to the
// GGUF ones (model.layers.N.self_attn.q_proj.weight -> blk.N.attn_q.weight, ...), and each rank's
// slice is dequantized from the file's blocks into the requested dtype, reading only its rows.
//
// llama.cpp's converter permutes the rows of Q and K of `llama` models within each head (it
// interleaves the two rotary halves for ggml's RoPE): reading HF row h*d + i*d/2 + k returns GGUF
// row h*d + 2k + i (convert_hf_to_gguf.py, LlamaModel.permute). `qwen2` files are not permuted.
// A column slice (the row-parallel o_proj/down_proj of a rank) may cut a quantization block: the
// blocks covering it are dequantized whole and only its columns are kept, so every TP degree reads
// the values a whole-row read gives. read_quantized hands out those covering blocks as stored,
// with the slice's offset in the first one.
#pragma once

#include "model_io/gguf_file.hpp"
#include "model_io/tensor_source.hpp"

#include <string>

namespace selfspec {

// The GGUF name of a HuggingFace LLaMA-family tensor name; throws naming it when it has none.
std::string gguf_tensor_name(const std::string& hf_name);

class GgufTensorSource final : public TensorSource {
 public:
  // `file` must outlive the source; `config` gives the head counts the Q/K permutation needs.
  GgufTensorSource(const GgufFile& file, const ModelConfig& config);
  // Every expected tensor present with its shape; no tensor the model does not use.
  void validate(const ModelConfig& config) const override;
  // F32/F16/BF16 as stored; quantized types dequantize exactly into f32.
  DType dtype(const std::string& name) const override;
  void read(const std::string& name, const TensorSlice& slice, DType dst_dtype,
            void* dst) const override;
  std::string describe() const override;
  // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K tensors: their blocks, as stored, for the
  // native kernels (rows in HF order: Q and K of `llama` files unpermuted row by row).
  std::optional<WeightFormat> quantized_format(const std::string& name) const override;
  QuantizedSlice read_quantized(const std::string& name, const TensorSlice& slice) const override;
  // Any other quantized type (Q2_K, Q3_K): dequantized at load.
  std::optional<std::string> dequantized_only_type(const std::string& name) const override;

 private:
  // The GGUF row holding HF row `row` of tensor `hf_name`.
  std::int64_t source_row(const std::string& hf_name, std::int64_t row) const;
  void read_rows(const GgufTensorInfo& info, const std::string& hf_name, const TensorSlice& slice,
                 DType dst_dtype, void* dst) const;
  void read_vector(const GgufTensorInfo& info, const std::string& hf_name, const TensorSlice& slice,
                   DType dst_dtype, void* dst) const;

  const GgufFile& file_;
  ModelConfig config_;
  bool permuted_qk_;
};

}  // namespace selfspec
