// Option types shared by several subcommands (dtype names, engine options).
#pragma once

#include "core/dtype.hpp"
#include "runtime/engine.hpp"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace selfspec::launch {

// "--weights-dtype auto|f32|bf16|f16": nullopt for auto.
std::optional<DType> parse_weights_dtype(const std::string& text);

// --model, --tokenizer, --weights-dtype, --ctx-size, --threads, --device.
struct EngineCliOptions {
  std::string model_dir;
  std::string tokenizer;
  std::string weights_dtype = "auto";
  std::int64_t ctx_size = 0;
  int threads = 0;
  std::string device = "auto";
  std::string cuda_graphs = "on";

  void add_to(CLI::App& command);
  EngineOptions engine_options() const;
};

}  // namespace selfspec::launch
