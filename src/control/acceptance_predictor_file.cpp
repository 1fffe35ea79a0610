#include "control/acceptance_predictor_file.hpp"

#include "core/error.hpp"
#include "model_io/safetensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <map>
#include <vector>

namespace selfspec {
namespace {

const std::string& field(const std::map<std::string, std::string>& metadata,
                         const std::filesystem::path& path, const std::string& key) {
  const auto it = metadata.find(key);
  SELFSPEC_CHECK(it != metadata.end(), "acceptance predictor {}: the metadata has no '{}'",
                 path.string(), key);
  return it->second;
}

template <typename T>
T number(const std::map<std::string, std::string>& metadata, const std::filesystem::path& path,
         const std::string& key) {
  const std::string& text = field(metadata, path, key);
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  SELFSPEC_CHECK(error == std::errc{} && end == text.data() + text.size(),
                 "acceptance predictor {}: metadata '{}' = '{}' is not a number", path.string(),
                 key, text);
  return value;
}

std::vector<float> tensor(const Checkpoint& file, const std::filesystem::path& path,
                          const std::string& name, const std::vector<std::int64_t>& shape) {
  SELFSPEC_CHECK(file.contains(name), "acceptance predictor {}: no tensor '{}'", path.string(),
                 name);
  const TensorInfo& info = file.tensor(name);
  SELFSPEC_CHECK(info.shape == shape,
                 "acceptance predictor {}: tensor '{}' has shape [{}], expected [{}]",
                 path.string(), name, fmt::join(info.shape, ", "), fmt::join(shape, ", "));
  std::vector<float> values(static_cast<std::size_t>(info.numel()));
  file.read_all(info, DType::kF32, values.data());
  for (const float v : values) {
    SELFSPEC_CHECK(std::isfinite(v), "acceptance predictor {}: tensor '{}' holds {}", path.string(),
                   name, v);
  }
  return values;
}

}  // namespace

std::shared_ptr<const AcceptancePredictor> load_acceptance_predictor(
    const std::filesystem::path& path, const PredictorTarget& target) {
  SELFSPEC_CHECK(std::filesystem::is_regular_file(path), "acceptance predictor {}: no such file",
                 path.string());
  const Checkpoint file = Checkpoint::open(path);
  const std::map<std::string, std::string> metadata = SafetensorsFile(path).metadata();
  const std::string& format = field(metadata, path, "format");
  SELFSPEC_CHECK(format == kCaliPredictorFormat,
                 "acceptance predictor {}: metadata format is '{}', expected '{}'", path.string(),
                 format, kCaliPredictorFormat);
  const std::string& identity = field(metadata, path, "model_identity");
  SELFSPEC_CHECK(identity == target.model_identity,
                 "acceptance predictor {} was made for another model (model_identity {}, this "
                 "model is {})",
                 path.string(), identity, target.model_identity);
  const auto exit_layer = number<int>(metadata, path, "exit_layer");
  SELFSPEC_CHECK(exit_layer == target.exit_layer,
                 "acceptance predictor {} was trained for exit layer {}; the exit head's is {}",
                 path.string(), exit_layer, target.exit_layer);
  AcceptancePredictorWeights weights;
  weights.hidden_size = number<std::int64_t>(metadata, path, "hidden_size");
  SELFSPEC_CHECK(weights.hidden_size == target.hidden_size,
                 "acceptance predictor {}: hidden_size {}, the model's is {}", path.string(),
                 weights.hidden_size, target.hidden_size);
  weights.steps = number<int>(metadata, path, "steps");
  SELFSPEC_CHECK(weights.steps >= 1 && weights.steps <= 64,
                 "acceptance predictor {}: steps {} is outside [1, 64]", path.string(),
                 weights.steps);
  weights.sigma_m = number<double>(metadata, path, "sigma_m");
  const std::int64_t d = weights.hidden_size;
  weights.step_transforms = tensor(file, path, "cali.step_transforms", {weights.steps, d, d});
  weights.weight = tensor(file, path, "cali.weight", {2 * d});
  weights.bias = tensor(file, path, "cali.bias", {1})[0];
  return std::make_shared<const AcceptancePredictor>(weights);
}

}  // namespace selfspec
