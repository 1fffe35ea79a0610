#include "model/exit_head.hpp"

#include "core/error.hpp"
#include "model/head_file.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/exit_head_files.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/tensor_source.hpp"

#include <string_view>
#include <vector>

namespace selfspec {
namespace {

constexpr std::string_view kFormat = "selfspec-exit-head";
constexpr std::string_view kPrefix = "exit_layer.";
constexpr std::string_view kKind = "exit head";

}  // namespace

ExitHeadInfo read_exit_head_info(const std::filesystem::path& path) {
  const HeadFile file = read_head_file(kKind, path);
  file.check_format(kFormat);
  ExitHeadInfo info;
  info.metadata = file.metadata;
  info.exit_layer = static_cast<int>(file.integer("exit_layer"));
  info.model_identity = file.field("model_identity");
  return info;
}

ExitHead load_exit_head(const std::filesystem::path& path, const ModelConfig& config,
                        const std::string& identity, const ShardPlan& plan,
                        std::optional<WeightFormat> convert_to, Backend& backend) {
  const ExitHeadInfo info = read_exit_head_info(path);
  SELFSPEC_CHECK(info.model_identity == identity,
                 "exit head {} was made for another model (model_identity {}, this model is {})",
                 path.string(), info.model_identity, identity);
  const HeadFile file{kKind, path, info.metadata};
  const std::int64_t hidden = file.integer("hidden_size");
  const std::int64_t layers = file.integer("num_layers");
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
    file.check_tensor(checkpoint, std::string(kPrefix) + suffix,
                      layer_shapes.at(layer_tensor_name(0, suffix)));
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
