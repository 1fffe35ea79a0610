#include "core/weight_format.hpp"

namespace selfspec {

std::string_view weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kF16:
      return "f16";
    case WeightFormat::kQ4_0:
      return "q4_0";
    case WeightFormat::kQ4_1:
      return "q4_1";
    case WeightFormat::kQ5_0:
      return "q5_0";
    case WeightFormat::kQ5_1:
      return "q5_1";
    case WeightFormat::kQ8_0:
      return "q8_0";
    case WeightFormat::kQ4_K:
      return "q4_k";
    case WeightFormat::kQ5_K:
      return "q5_k";
    case WeightFormat::kQ6_K:
      return "q6_k";
  }
  return "?";
}

namespace {

constexpr WeightFormat kDenseFormats[] = {WeightFormat::kF32, WeightFormat::kBF16,
                                          WeightFormat::kF16};

}  // namespace

std::optional<WeightFormat> parse_weight_format(std::string_view name) {
  for (const WeightFormat format : kDenseFormats) {
    if (weight_format_name(format) == name) return format;
  }
  for (const WeightFormat format : kQuantizedFormats) {
    if (weight_format_name(format) == name) return format;
  }
  return std::nullopt;
}

std::vector<std::string> weight_format_choices(std::string_view first) {
  std::vector<std::string> names{std::string(first)};
  for (const WeightFormat format : kDenseFormats) names.emplace_back(weight_format_name(format));
  for (const WeightFormat format : kQuantizedFormats) {
    names.emplace_back(weight_format_name(format));
  }
  return names;
}

}  // namespace selfspec
