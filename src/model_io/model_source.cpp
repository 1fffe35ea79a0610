#include "model_io/model_source.hpp"

#include "core/error.hpp"
#include "model_io/architecture_file.hpp"
#include "model_io/synthetic_model.hpp"

#include <fmt/format.h>

namespace selfspec {

ModelSource resolve_model_source(const ModelSourceOptions& options) {
  const bool has_model = !options.model_dir.empty();
  const bool has_architecture = !options.architecture_file.empty();
  SELFSPEC_CHECK(has_model || has_architecture,
                 "no model: give --model DIR (a HuggingFace checkpoint) or --architecture FILE "
                 "(an architecture file, run with synthetic weights)");
  SELFSPEC_CHECK(!(has_model && has_architecture),
                 "--model {} and --architecture {}: give one of them, not both",
                 options.model_dir.string(), options.architecture_file.string());

  ModelSource source;
  source.seed = options.synthetic_seed;
  if (has_model) {
    const std::filesystem::path config_path = options.model_dir / "config.json";
    SELFSPEC_CHECK(std::filesystem::is_directory(options.model_dir), "--model {}: not a directory",
                   options.model_dir.string());
    SELFSPEC_CHECK(std::filesystem::exists(config_path), "--model {}: config.json not found",
                   options.model_dir.string());
    source.config = ModelConfig::from_file(config_path);
    source.model_dir = options.model_dir;
    source.synthetic = options.synthetic_weights;
    source.name = options.model_dir.string();
    source.description = fmt::format("--model {}", options.model_dir.string());
  } else {
    const ArchitectureFile file = load_architecture_file(options.architecture_file);
    source.config = file.config;
    source.synthetic = true;  // an architecture has no weights
    source.name = file.name;
    source.description =
        fmt::format("--architecture {} ({})", options.architecture_file.string(), file.name);
  }
  if (options.layers != 0) {
    SELFSPEC_CHECK(options.layers > 0, "--layers must be positive (got {})", options.layers);
    SELFSPEC_CHECK(source.synthetic,
                   "--layers {} needs synthetic weights (--architecture or --synthetic-weights): "
                   "a checkpoint's layers cannot be dropped",
                   options.layers);
    source.config.num_layers = options.layers;
    source.description += fmt::format(", {} layers", options.layers);
  }
  if (source.synthetic) {
    source.description += fmt::format(", synthetic weights (seed {})", source.seed);
  }
  return source;
}

DType synthetic_weights_dtype(const ModelConfig& config, std::optional<DType> requested) {
  if (requested) return *requested;
  return config.torch_dtype.value_or(DType::kBF16);
}

std::unique_ptr<TensorSource> make_synthetic_tensor_source(const ModelSource& source, DType dtype) {
  SyntheticModelSpec spec;
  spec.config = source.config;
  spec.dtype = dtype;
  spec.seed = source.seed;
  return std::make_unique<SyntheticSource>(std::move(spec));
}

}  // namespace selfspec
