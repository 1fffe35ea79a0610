// Where a model's weights come from: a checkpoint on disk (CheckpointSource) or seeded synthetic
// values (SyntheticSource, synthetic_model.hpp). LlamaWeights::load reads every rank's slices
// through this interface, so a 70B-geometry model with synthetic weights loads on a CPU exactly
// like a real checkpoint — each rank producing only its own slices.
#pragma once

#include "core/dtype.hpp"
#include "core/weight_format.hpp"
#include "model_io/model_config.hpp"
#include "model_io/safetensors.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace selfspec {

// The rows of a quantized tensor's slice as its file stores them (GGUF blocks): row r's blocks at
// data + r * row_stride; the slice's columns are [skip, skip + cols) of them.
struct QuantizedSlice {
  WeightFormat format = WeightFormat::kQ4_0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;
  std::int64_t skip = 0;
  std::vector<std::byte> data;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // Checks every expected tensor against the config (names, shapes); throws naming the tensor.
  virtual void validate(const ModelConfig& config) const = 0;
  // The storage dtype of a tensor.
  virtual DType dtype(const std::string& name) const = 0;
  // Copies the slice of a 1-D or 2-D tensor into dst (row-major, slice-shaped) as dst_dtype.
  virtual void read(const std::string& name, const TensorSlice& slice, DType dst_dtype,
                    void* dst) const = 0;
  // "checkpoint /models/x (2 files)", "synthetic weights (seed 0, bf16)".
  virtual std::string describe() const = 0;
  // The quantized format a tensor is stored in, when a kernel runs that format as stored; nullopt
  // when it is stored dense (the default) or in a type read only by dequantizing it.
  virtual std::optional<WeightFormat> quantized_format(const std::string& name) const;
  // The name of the quantized type a tensor is stored in when no kernel runs it as stored (it is
  // dequantized at load: "Q2_K"); nullopt otherwise (the default).
  virtual std::optional<std::string> dequantized_only_type(const std::string& name) const;
  // A 2-D quantized tensor's slice as stored, without dequantizing: the rows
  // [row_begin, row_end) and the blocks covering columns [col_begin, col_end), which must fall on
  // 32-column boundaries. Throws for a tensor stored dense.
  virtual QuantizedSlice read_quantized(const std::string& name, const TensorSlice& slice) const;
};

class CheckpointSource final : public TensorSource {
 public:
  explicit CheckpointSource(const Checkpoint& checkpoint) : checkpoint_(checkpoint) {}
  void validate(const ModelConfig& config) const override;
  DType dtype(const std::string& name) const override;
  void read(const std::string& name, const TensorSlice& slice, DType dst_dtype,
            void* dst) const override;
  std::string describe() const override;

 private:
  const Checkpoint& checkpoint_;
};

}  // namespace selfspec
