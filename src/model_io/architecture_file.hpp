// Architecture files (`configs/models/*.yaml`): a model's published config.json under `config:`,
// with its name and where the numbers come from. They let `selfspec plan` size a 70B deployment
// and the synthetic-weights mode run its geometry without downloading anything. A plain
// config.json (HF layout, JSON) is accepted as an architecture file too.
//
//   name: llama-2-70b
//   source: https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json
//   config:
//     model_type: llama
//     hidden_size: 8192
//     ...
#pragma once

#include "model_io/model_config.hpp"

#include <filesystem>
#include <string>

namespace selfspec {

struct ArchitectureFile {
  std::string name;    // the file's `name`, else the file name without extension
  std::string source;  // provenance of the numbers (may be empty)
  ModelConfig config;
};

// Reads and validates an architecture file (YAML or JSON). Errors name the file and the key.
ArchitectureFile load_architecture_file(const std::filesystem::path& path);

}  // namespace selfspec
