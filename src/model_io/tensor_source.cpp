#include "model_io/tensor_source.hpp"

#include "core/error.hpp"
#include "model_io/checkpoint_layout.hpp"

#include <fmt/format.h>

namespace selfspec {

std::optional<WeightFormat> TensorSource::quantized_format(const std::string& /*name*/) const {
  return std::nullopt;
}

std::optional<std::string> TensorSource::dequantized_only_type(const std::string& /*name*/) const {
  return std::nullopt;
}

QuantizedSlice TensorSource::read_quantized(const std::string& name,
                                            const TensorSlice& /*slice*/) const {
  fail("{}: tensor '{}' is not stored quantized", describe(), name);
}

void CheckpointSource::validate(const ModelConfig& config) const {
  validate_checkpoint(checkpoint_, config);
}

DType CheckpointSource::dtype(const std::string& name) const {
  return checkpoint_.tensor(name).dtype;
}

void CheckpointSource::read(const std::string& name, const TensorSlice& slice, DType dst_dtype,
                            void* dst) const {
  checkpoint_.read(checkpoint_.tensor(name), slice, dst_dtype, dst);
}

std::string CheckpointSource::describe() const {
  return fmt::format("checkpoint {} ({} file(s))", checkpoint_.directory().string(),
                     checkpoint_.file_count());
}

}  // namespace selfspec
