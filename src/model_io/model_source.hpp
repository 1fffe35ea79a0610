// Where a run's model comes from, resolved from the engine options before anything heavy happens:
//   --model DIR                       config.json + the checkpoint's weights
//   --model FILE.gguf                 a GGUF file (also: a directory holding exactly one .gguf and
//                                     no config.json)
//   --model DIR --synthetic-weights   config.json (and tokenizer) of DIR, seeded random weights
//   --architecture FILE               an architecture file (configs/models/), seeded random weights
// with --layers N overriding the layer count of synthetic models (70B geometry with two layers on
// a CPU). Shared by the engine and by `selfspec plan`, which never reads weights.
#pragma once

#include "core/dtype.hpp"
#include "model_io/model_config.hpp"
#include "model_io/tensor_source.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace selfspec {

struct ModelSourceOptions {
  std::filesystem::path model_path;         // --model (a directory or a .gguf file)
  std::filesystem::path architecture_file;  // --architecture
  bool synthetic_weights = false;           // --synthetic-weights (implied by --architecture)
  std::uint64_t synthetic_seed = 0;         // --synthetic-seed
  std::int64_t layers = 0;                  // --layers (0: as configured; synthetic only)
};

struct ModelSource {
  ModelConfig config;
  // The checkpoint directory or the .gguf file; empty for an architecture file.
  std::filesystem::path model_path;
  bool gguf = false;  // model_path is a GGUF file
  bool synthetic = false;
  std::uint64_t seed = 0;
  std::string name;         // "llama-2-70b", or the model directory
  std::string description;  // "--architecture configs/models/llama-2-70b.yaml (synthetic ...)"
};

// Validates the combination of options (exactly one of --model / --architecture, --layers only
// with synthetic weights) and reads the config. Throws selfspec::Error naming the option or file.
ModelSource resolve_model_source(const ModelSourceOptions& options);

// The dtype synthetic weights are made in: the requested one, else config's torch_dtype, else
// bf16 (what 70B-class checkpoints ship in).
DType synthetic_weights_dtype(const ModelConfig& config, std::optional<DType> requested);

// Seeded random weights for a synthetic source.
// matrix_format: the matrices stored quantized in that format (synthetic_model.hpp).
std::unique_ptr<TensorSource> make_synthetic_tensor_source(
    const ModelSource& source, DType dtype,
    std::optional<WeightFormat> matrix_format = std::nullopt);

}  // namespace selfspec
