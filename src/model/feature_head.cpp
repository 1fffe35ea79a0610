#include "model/feature_head.hpp"

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

constexpr std::string_view kFormat = "selfspec-feature-head";
constexpr std::string_view kVersion = "1";
constexpr std::string_view kKind = "feature head";
constexpr std::string_view kFcWeight = "feature_head.fc.weight";
constexpr std::string_view kFcBias = "feature_head.fc.bias";
constexpr std::string_view kLayerPrefix = "feature_head.layer.";

HeadFile checked_file(const std::filesystem::path& path) {
  const HeadFile file = read_head_file(kKind, path);
  file.check_format(kFormat);
  const std::string version = file.field("version");
  SELFSPEC_CHECK(version == kVersion, "feature head {}: format version '{}', this build reads '{}'",
                 path.string(), version, kVersion);
  return file;
}

}  // namespace

std::uint64_t FeatureHead::bytes() const {
  return fc_feature.bytes() + fc_embedding.bytes() + fc_bias.bytes() + layer_weight_bytes(layer);
}

std::map<std::string, std::string> read_feature_head_metadata(const std::filesystem::path& path) {
  return checked_file(path).metadata;
}

FeatureHead load_feature_head(const std::filesystem::path& path, const ModelConfig& config,
                              const std::string& identity, const ShardPlan& plan,
                              std::optional<WeightFormat> convert_to, Backend& backend) {
  const HeadFile file = checked_file(path);
  const std::string made_for = file.field("model_identity");
  SELFSPEC_CHECK(made_for == identity,
                 "feature head {} was made for another model (model_identity {}, this model is "
                 "{})",
                 path.string(), made_for, identity);
  const std::int64_t hidden = file.integer("hidden_size");
  const std::int64_t layers = file.integer("num_layers");
  SELFSPEC_CHECK(hidden == config.hidden_size && layers == config.num_layers,
                 "feature head {} is for hidden_size {} and {} layers; the model has {} and {}",
                 path.string(), hidden, layers, config.hidden_size, config.num_layers);
  const Checkpoint checkpoint = Checkpoint::open(path);
  file.check_tensor(checkpoint, std::string(kFcWeight), {hidden, 2 * hidden});
  file.check_tensor(checkpoint, std::string(kFcBias), {hidden});
  std::map<std::string, std::vector<std::int64_t>> layer_shapes;
  for (const ExpectedTensor& t : expected_tensors(config)) layer_shapes[t.name] = t.shape;
  for (const std::string& suffix : exit_layer_suffixes(config)) {
    file.check_tensor(checkpoint, std::string(kLayerPrefix) + suffix,
                      layer_shapes.at(layer_tensor_name(0, suffix)));
  }
  FeatureHead head;
  head.path = path;
  head.metadata = file.metadata;
  const CheckpointSource source(checkpoint);
  const IndexRange rows{0, hidden};
  head.fc_feature =
      load_matrix_slice(source, std::string(kFcWeight), rows, {0, hidden}, convert_to, backend);
  head.fc_embedding = load_matrix_slice(source, std::string(kFcWeight), rows, {hidden, 2 * hidden},
                                        convert_to, backend);
  head.fc_bias = load_vector_slice(source, std::string(kFcBias), rows, backend);
  head.layer = load_layer_weights(
      source,
      [](std::string_view suffix) { return std::string(kLayerPrefix) + std::string(suffix); },
      config, plan, convert_to, backend);
  return head;
}

}  // namespace selfspec
