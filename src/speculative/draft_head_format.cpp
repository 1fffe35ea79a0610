#include "speculative/draft_head_format.hpp"

#include "core/dtype.hpp"
#include "engine/engine.hpp"

namespace selfspec {

std::optional<WeightFormat> draft_head_format(const Engine& engine, std::string_view setting) {
  if (setting != "auto") return parse_weight_format(setting);
  if (engine.native_quantized_weights()) return WeightFormat::kQ8_0;
  const std::optional<DType> load = engine.load_dtype();
  return load ? std::optional(dense_format(*load)) : std::nullopt;
}

}  // namespace selfspec
