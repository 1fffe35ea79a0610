// manifest.json of an early-exit training-data directory (issue 11's "selfspec-exit-data",
// version 1): what was collected (model, exit layer, top-k, prompts, how sequences were made),
// the shards written so far and whether the collection is complete. Rewritten atomically after
// every shard, so an interrupted collection resumes after its last whole shard; a resume must
// ask for the same collection (check_same_collection names the field that differs).
#pragma once

#include "model_io/model_config.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace selfspec::launch {

inline constexpr std::string_view kExitDataFormat = "selfspec-exit-data";
inline constexpr int kExitDataVersion = 1;

struct ExitDataShardEntry {
  std::string file;
  std::int64_t sequences = 0;
  std::int64_t positions = 0;
};

struct ExitDataManifest {
  // Everything but the progress: format, version, model, exit_layer, top_k, prompts_file,
  // prompts_sha256, split, mix, tp, init_layer, frozen.
  nlohmann::ordered_json settings;
  std::vector<ExitDataShardEntry> shards;
  bool complete = false;

  std::int64_t sequences() const;
  std::int64_t positions() const;
  nlohmann::ordered_json to_json() const;
  // Throws naming `source` and the key when the JSON is not a version-1 manifest.
  static ExitDataManifest from_json(const nlohmann::json& json, const std::string& source);
};

// The manifest's "model" object.
nlohmann::ordered_json exit_data_model_json(const std::string& path, const std::string& identity,
                                            const ModelConfig& config);

// Throws when `existing` (read from `source`) was collected with other settings than `fresh`,
// naming the field and the option that sets it: the model's identity, the exit layer, top-k,
// the prompts' SHA-256, the split and every entry of "mix" that describes how sequences are made.
void check_same_collection(const ExitDataManifest& existing, const ExitDataManifest& fresh,
                           const std::string& source);

std::filesystem::path exit_data_manifest_path(const std::filesystem::path& dir);
// Writes DIR/manifest.json atomically (a temporary file renamed over it).
void save_exit_data_manifest(const std::filesystem::path& dir, const ExitDataManifest& manifest);
// DIR/manifest.json, or nullopt when there is none.
std::optional<ExitDataManifest> load_exit_data_manifest(const std::filesystem::path& dir);

}  // namespace selfspec::launch
