#include "model_io/model_source.hpp"

#include "core/error.hpp"
#include "model_io/architecture_file.hpp"
#include "model_io/gguf_file.hpp"
#include "model_io/gguf_model_config.hpp"
#include "model_io/synthetic_model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fmt/std.h>

#include <algorithm>
#include <vector>

namespace selfspec {
namespace {

// The one .gguf file of a directory without config.json; empty when there is none.
std::filesystem::path gguf_in_directory(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "config.json")) return {};
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".gguf" && is_gguf_file(entry.path())) {
      found.push_back(entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  SELFSPEC_CHECK(found.size() <= 1, "--model {}: {} GGUF files ({}); give one of them as --model",
                 dir.string(), found.size(), fmt::join(found, ", "));
  return found.empty() ? std::filesystem::path{} : found.front();
}

// --model: a GGUF file, a directory holding one, or a HuggingFace checkpoint directory.
void resolve_checkpoint(const ModelSourceOptions& options, ModelSource& source) {
  const std::filesystem::path& path = options.model_path;
  SELFSPEC_CHECK(std::filesystem::exists(path), "--model {}: no such file or directory",
                 path.string());
  std::filesystem::path gguf;
  if (std::filesystem::is_directory(path)) {
    gguf = gguf_in_directory(path);
  } else {
    SELFSPEC_CHECK(is_gguf_file(path),
                   "--model {}: not a GGUF file (no 'GGUF' magic) and not a directory",
                   path.string());
    gguf = path;
  }
  source.synthetic = options.synthetic_weights;
  source.name = path.string();
  if (!gguf.empty()) {
    source.config = model_config_from_gguf(GgufFile(gguf));
    source.model_path = gguf;
    source.gguf = true;
    source.description = fmt::format("--model {} (GGUF)", gguf.string());
    return;
  }
  const std::filesystem::path config_path = path / "config.json";
  SELFSPEC_CHECK(std::filesystem::exists(config_path),
                 "--model {}: config.json not found (and no .gguf file)", path.string());
  source.config = ModelConfig::from_file(config_path);
  source.model_path = path;
  source.description = fmt::format("--model {}", path.string());
}

}  // namespace

ModelSource resolve_model_source(const ModelSourceOptions& options) {
  const bool has_model = !options.model_path.empty();
  const bool has_architecture = !options.architecture_file.empty();
  SELFSPEC_CHECK(
      has_model || has_architecture,
      "no model: give --model DIR|FILE.gguf (a HuggingFace checkpoint or a GGUF file) or "
      "--architecture FILE "
      "(an architecture file, run with synthetic weights)");
  SELFSPEC_CHECK(!(has_model && has_architecture),
                 "--model {} and --architecture {}: give one of them, not both",
                 options.model_path.string(), options.architecture_file.string());

  ModelSource source;
  source.seed = options.synthetic_seed;
  if (has_model) {
    resolve_checkpoint(options, source);
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

std::unique_ptr<TensorSource> make_synthetic_tensor_source(
    const ModelSource& source, DType dtype, std::optional<WeightFormat> matrix_format) {
  SyntheticModelSpec spec;
  spec.config = source.config;
  spec.dtype = dtype;
  spec.seed = source.seed;
  spec.matrix_format = matrix_format;
  return std::make_unique<SyntheticSource>(std::move(spec));
}

}  // namespace selfspec
