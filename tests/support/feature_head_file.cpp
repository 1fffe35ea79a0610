#include "tests/support/feature_head_file.hpp"

#include "model/feature_head.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/exit_head_files.hpp"
#include "model_io/model_identity.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/safetensors_file_output.hpp"
#include "model_io/safetensors_writer.hpp"
#include "model_io/tensor_source.hpp"
#include "tests/support/model_fixture.hpp"

#include <random>

namespace selfspec::testing {

FeatureHeadValues write_feature_head(const std::filesystem::path& checkpoint_dir,
                                     const ModelConfig& config, const std::filesystem::path& path,
                                     const FeatureHeadFile& options) {
  const Checkpoint checkpoint = Checkpoint::open(checkpoint_dir);
  const CheckpointSource source(checkpoint);
  const std::int64_t h = config.hidden_size;
  const std::int64_t cols = options.fc_cols > 0 ? options.fc_cols : 2 * h;
  FeatureHeadValues values;
  values.path = path;
  std::mt19937_64 random(options.seed);
  std::uniform_real_distribution<float> spread(static_cast<float>(-options.spread),
                                               static_cast<float>(options.spread));
  values.fc.assign(static_cast<std::size_t>(h * cols), 0.0F);
  for (std::int64_t r = 0; r < h; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      values.fc[static_cast<std::size_t>(r * cols + c)] =
          c == r ? 1.0F : (c >= h ? spread(random) : 0.0F);
    }
  }
  values.bias.resize(static_cast<std::size_t>(h));
  for (float& b : values.bias) b = spread(random);

  SafetensorsWriter writer;
  const auto add = [&](const std::string& name, std::vector<std::int64_t> shape,
                       SafetensorsWriter::FillFn fill) {
    if (name != options.omit) writer.add(name, DType::kF32, std::move(shape), std::move(fill));
  };
  add("feature_head.fc.weight", {h, cols}, SafetensorsWriter::copy_of(values.fc));
  add("feature_head.fc.bias", {h}, SafetensorsWriter::copy_of(values.bias));
  const std::int64_t last = config.num_layers - 1;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const ExpectedTensor& t : expected_tensors(config)) shapes[t.name] = t.shape;
  for (const std::string& suffix : exit_layer_suffixes(config)) {
    const std::string name = layer_tensor_name(last, suffix);
    const std::vector<std::int64_t> shape = shapes.at(name);
    add("feature_head.layer." + suffix, shape, [&source, name, shape](std::span<std::byte> out) {
      TensorSlice slice;
      slice.row_end = shape[0];
      slice.col_end = shape.size() > 1 ? shape[1] : 0;
      source.read(name, slice, DType::kF32, out.data());
    });
  }
  std::map<std::string, std::string> metadata = {{"format", "selfspec-feature-head"},
                                                 {"version", "1"},
                                                 {"model_identity", model_identity(source, config)},
                                                 {"hidden_size", std::to_string(h)},
                                                 {"num_layers", std::to_string(config.num_layers)}};
  for (const auto& [key, value] : options.metadata) metadata[key] = value;
  for (const auto& [key, value] : metadata) writer.set_metadata(key, value);
  write_safetensors_file(writer, path);
  return values;
}

std::vector<float> final_residual_rows(LlamaModel& model, std::span<const std::int32_t> tokens) {
  std::vector<float> rows;
  const ForwardObserver keep = [&](std::string_view name, int, std::span<const float> data,
                                   std::int64_t) {
    if (name == "final_residual") rows.assign(data.begin(), data.end());
  };
  KvCache kv = model.make_kv_cache(static_cast<std::int64_t>(tokens.size()));
  const std::int32_t last = static_cast<std::int32_t>(tokens.size()) - 1;
  forward_rows(model, kv, tokens, std::span(&last, 1), nullptr, nullptr, {}, &keep);
  return rows;
}

std::vector<float> feature_forward_logits(LlamaModel& model, KvCache& kv,
                                          std::span<const float> features,
                                          std::span<const std::int32_t> tokens,
                                          std::int64_t first) {
  const auto n = tokens.size();
  std::vector<std::int32_t> positions(n), rows(n);
  for (std::size_t i = 0; i < n; ++i) {
    positions[i] = static_cast<std::int32_t>(first + static_cast<std::int64_t>(i));
    rows[i] = static_cast<std::int32_t>(i);
  }
  const FeatureRows input{features, first};
  ForwardArgs args;
  args.tokens = tokens;
  args.positions = positions;
  args.logit_rows = rows;
  args.draft.features = &input;
  std::vector<float> logits;
  model.forward(args, kv, logits);
  return logits;
}

FeatureHeadValues attach_feature_head(LlamaModel& model, const std::filesystem::path& dir,
                                      std::uint64_t seed) {
  FeatureHeadFile options;
  options.seed = seed;
  FeatureHeadValues values =
      write_feature_head(dir, model.config(), dir / "feature_head.safetensors", options);
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const std::string identity = model_identity(CheckpointSource(checkpoint), model.config());
  model.attach_feature_head(load_feature_head(values.path, model.config(), identity, model.shard(),
                                              std::nullopt, model.backend()));
  return values;
}

}  // namespace selfspec::testing
