#include "model/exit_head.hpp"

#include "core/error.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/exit_head_files.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/tensor_source.hpp"

#include <charconv>
#include <string_view>
#include <vector>

namespace selfspec {
namespace {

constexpr std::string_view kFormat = "selfspec-exit-head";
constexpr std::string_view kPrefix = "exit_layer.";

std::string metadata_field(const std::map<std::string, std::string>& metadata,
                           const std::filesystem::path& path, const std::string& key) {
  const auto it = metadata.find(key);
  SELFSPEC_CHECK(it != metadata.end(), "exit head {}: the metadata has no '{}'", path.string(),
                 key);
  return it->second;
}

std::int64_t metadata_int(const std::map<std::string, std::string>& metadata,
                          const std::filesystem::path& path, const std::string& key) {
  const std::string text = metadata_field(metadata, path, key);
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  SELFSPEC_CHECK(error == std::errc{} && end == text.data() + text.size(),
                 "exit head {}: metadata '{}' = '{}' is not an integer", path.string(), key, text);
  return value;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace

ExitHeadInfo read_exit_head_info(const std::filesystem::path& path) {
  const SafetensorsFile file(path);
  ExitHeadInfo info;
  info.metadata = file.metadata();
  const std::string format = metadata_field(info.metadata, path, "format");
  SELFSPEC_CHECK(format == kFormat, "exit head {}: metadata format is '{}', expected '{}'",
                 path.string(), format, kFormat);
  info.exit_layer = static_cast<int>(metadata_int(info.metadata, path, "exit_layer"));
  info.model_identity = metadata_field(info.metadata, path, "model_identity");
  return info;
}

ExitHead load_exit_head(const std::filesystem::path& path, const ModelConfig& config,
                        const std::string& identity, const ShardPlan& plan,
                        std::optional<WeightFormat> convert_to, Backend& backend) {
  const ExitHeadInfo info = read_exit_head_info(path);
  SELFSPEC_CHECK(info.model_identity == identity,
                 "exit head {} was made for another model (model_identity {}, this model is {})",
                 path.string(), info.model_identity, identity);
  const std::int64_t hidden = metadata_int(info.metadata, path, "hidden_size");
  const std::int64_t layers = metadata_int(info.metadata, path, "num_layers");
  SELFSPEC_CHECK(hidden == config.hidden_size && layers == config.num_layers,
                 "exit head {} is for hidden_size {} and {} layers; the model has {} and {}",
                 path.string(), hidden, layers, config.hidden_size, config.num_layers);
  SELFSPEC_CHECK(info.exit_layer >= 1 && info.exit_layer < config.num_layers,
                 "exit head {}: exit_layer {} is outside [1, {}]", path.string(), info.exit_layer,
                 config.num_layers - 1);
  const Checkpoint checkpoint = Checkpoint::open(path);
  // Every tensor of a model layer (model_io/exit_head_files.hpp), with the model's shapes.
  std::map<std::string, std::vector<std::int64_t>> layer_shapes;
  for (const ExpectedTensor& t : expected_tensors(config)) layer_shapes[t.name] = t.shape;
  for (const std::string& suffix : exit_layer_suffixes(config)) {
    const std::vector<std::int64_t>& shape = layer_shapes.at(layer_tensor_name(0, suffix));
    const std::string name = std::string(kPrefix) + suffix;
    SELFSPEC_CHECK(checkpoint.contains(name), "exit head {}: tensor '{}' is missing", path.string(),
                   name);
    const TensorInfo& tensor = checkpoint.tensor(name);
    SELFSPEC_CHECK(tensor.shape == shape, "exit head {}: tensor '{}' has shape {}, expected {}",
                   path.string(), name, shape_text(tensor.shape), shape_text(shape));
  }
  ExitHead head;
  head.path = path;
  head.exit_layer = info.exit_layer;
  head.metadata = info.metadata;
  const CheckpointSource source(checkpoint);
  head.weights = load_layer_weights(
      source, [](std::string_view suffix) { return std::string(kPrefix) + std::string(suffix); },
      config, plan, convert_to, backend);
  return head;
}

}  // namespace selfspec
