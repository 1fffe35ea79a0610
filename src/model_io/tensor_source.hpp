// Where a model's weights come from: a checkpoint on disk (CheckpointSource) or seeded synthetic
// values (SyntheticSource, synthetic_model.hpp). LlamaWeights::load reads every rank's slices
// through this interface, so a 70B-geometry model with synthetic weights loads on a CPU exactly
// like a real checkpoint — each rank producing only its own slices.
#pragma once

#include "core/dtype.hpp"
#include "model_io/model_config.hpp"
#include "model_io/safetensors.hpp"

#include <string>

namespace selfspec {

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
