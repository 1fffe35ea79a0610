// Option types shared by several subcommands (dtype names, engine options).
#pragma once

#include "core/dtype.hpp"
#include "engine/engine.hpp"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace selfspec::launch {

// "--weights-dtype auto|f32|bf16|f16": nullopt for auto.
std::optional<DType> parse_weights_dtype(const std::string& text);

// Declares `--config FILE` on a command (run_config.hpp reads the file before parsing; the
// declaration is for --help and so that CLI11 accepts the option).
void add_config_option(CLI::App& command);

// --model | --architecture [--synthetic-weights --synthetic-seed --layers], --tp, --tokenizer,
// --weights-dtype, --ctx-size, --threads, --device, --cuda-graphs, --config.
struct EngineCliOptions {
  std::string model_dir;
  std::string architecture;
  bool synthetic_weights = false;
  std::uint64_t synthetic_seed = 0;
  std::int64_t layers = 0;
  int tp = 0;
  std::string tokenizer;
  std::string weights_dtype = "auto";
  std::int64_t ctx_size = 0;
  int threads = 0;
  std::string device = "auto";
  std::string cuda_graphs = "on";

  void add_to(CLI::App& command);
  EngineOptions engine_options() const;
  // What the run's JSON calls the model: the directory or the architecture file.
  std::string model_name() const { return model_dir.empty() ? architecture : model_dir; }
};

}  // namespace selfspec::launch
