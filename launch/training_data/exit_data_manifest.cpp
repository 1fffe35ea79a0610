#include "launch/training_data/exit_data_manifest.hpp"

#include "core/error.hpp"
#include "core/text_file_output.hpp"

#include <fstream>
#include <utility>

namespace selfspec::launch {
namespace {

// The settings a resumed collection must share with the one it continues, with the option that
// sets each (JSON pointer into the manifest, option).
const std::vector<std::pair<std::string, std::string>>& collection_fields() {
  static const std::vector<std::pair<std::string, std::string>> fields = {
      {"/model/identity", "--model"},
      {"/exit_layer", "--exit-layer"},
      {"/top_k", "--top-k"},
      {"/prompts_sha256", "--prompts-file"},
      {"/split", "--split"},
      {"/mix/tasks", "--tasks"},
      {"/mix/max_prompts_per_task", "--max-prompts-per-task"},
      {"/mix/chat", "--chat"},
      {"/mix/system", "--system"},
      {"/mix/generate", "--generate"},
      {"/mix/sampled_fraction", "--sampled-fraction"},
      {"/mix/temperature", "--temperature"},
      {"/mix/seed", "--seed"},
      {"/mix/open_text", "--open-text"},
      {"/mix/continuations", "--continuations"},
      {"/mix/open_text_files/window", "--open-text-window"},
      {"/mix/open_text_files/max_tokens", "--open-text-tokens"},
      {"/mix/open_text_files/tokens", "--open-text-files"},
      {"/mix/open_text_continue", "--open-text-continue"},
      {"/reduction", "--reduction"},
  };
  return fields;
}

// The value at a JSON pointer, null when absent.
nlohmann::json field_value(const nlohmann::ordered_json& settings, const std::string& field) {
  const nlohmann::json json(settings);
  const nlohmann::json::json_pointer pointer(field);
  return json.contains(pointer) ? json.at(pointer) : nlohmann::json();
}

template <typename T>
T get_key(const nlohmann::json& json, const char* key, const std::string& source) {
  SELFSPEC_CHECK(json.is_object() && json.contains(key), "{}: missing key '{}'", source, key);
  try {
    return json.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    fail("{}: key '{}' has the wrong type ({})", source, key, e.what());
  }
}

}  // namespace

std::int64_t ExitDataManifest::sequences() const {
  std::int64_t n = 0;
  for (const ExitDataShardEntry& s : shards) n += s.sequences;
  return n;
}

std::int64_t ExitDataManifest::positions() const {
  std::int64_t n = 0;
  for (const ExitDataShardEntry& s : shards) n += s.positions;
  return n;
}

nlohmann::ordered_json ExitDataManifest::to_json() const {
  nlohmann::ordered_json json = settings;
  json["sequences"] = sequences();
  json["positions"] = positions();
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ExitDataShardEntry& s : shards) {
    list.push_back({{"file", s.file}, {"sequences", s.sequences}, {"positions", s.positions}});
  }
  json["shards"] = std::move(list);
  json["complete"] = complete;
  return json;
}

ExitDataManifest ExitDataManifest::from_json(const nlohmann::json& json,
                                             const std::string& source) {
  SELFSPEC_CHECK(get_key<std::string>(json, "format", source) == kExitDataFormat,
                 "{}: 'format' is not \"{}\"", source, kExitDataFormat);
  SELFSPEC_CHECK(get_key<int>(json, "version", source) == kExitDataVersion,
                 "{}: 'version' {} is not the supported {}", source, json.at("version").dump(),
                 kExitDataVersion);
  ExitDataManifest manifest;
  manifest.settings = nlohmann::ordered_json(json);
  for (const char* progress : {"sequences", "positions", "shards", "complete"}) {
    manifest.settings.erase(progress);
  }
  for (const nlohmann::json& shard : get_key<nlohmann::json>(json, "shards", source)) {
    const std::string where = source + " (a shard)";
    manifest.shards.push_back({get_key<std::string>(shard, "file", where),
                               get_key<std::int64_t>(shard, "sequences", where),
                               get_key<std::int64_t>(shard, "positions", where)});
  }
  manifest.complete = get_key<bool>(json, "complete", source);
  return manifest;
}

nlohmann::ordered_json exit_data_model_json(const std::string& path, const std::string& identity,
                                            const ModelConfig& config) {
  return {{"path", path},
          {"identity", identity},
          {"model_type", config.model_type},
          {"hidden_size", config.hidden_size},
          {"intermediate_size", config.intermediate_size},
          {"num_layers", config.num_layers},
          {"num_heads", config.num_heads},
          {"num_kv_heads", config.num_kv_heads},
          {"head_dim", config.head_dim},
          {"vocab_size", config.vocab_size},
          {"rope_theta", config.rope_theta},
          {"rms_norm_eps", config.rms_norm_eps},
          {"attention_bias", config.attention_bias},
          {"o_proj_bias", config.o_proj_bias()},
          {"tie_word_embeddings", config.tie_word_embeddings}};
}

void check_same_collection(const ExitDataManifest& existing, const ExitDataManifest& fresh,
                           const std::string& source) {
  for (const auto& [field, option] : collection_fields()) {
    const nlohmann::json before = field_value(existing.settings, field);
    const nlohmann::json now = field_value(fresh.settings, field);
    SELFSPEC_CHECK(before == now,
                   "--resume: {} was collected with {} = {}, this run has {} (set by {}); resume "
                   "with the same settings or collect into a new --out",
                   source, field.substr(1), before.dump(), now.dump(), option);
  }
}

std::filesystem::path exit_data_manifest_path(const std::filesystem::path& dir) {
  return dir / "manifest.json";
}

void save_exit_data_manifest(const std::filesystem::path& dir, const ExitDataManifest& manifest) {
  write_text_file_atomically(exit_data_manifest_path(dir), manifest.to_json().dump(2) + "\n",
                             "manifest");
}

std::optional<ExitDataManifest> load_exit_data_manifest(const std::filesystem::path& dir) {
  const std::filesystem::path path = exit_data_manifest_path(dir);
  if (!std::filesystem::exists(path)) return std::nullopt;
  std::ifstream in(path);
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({})", path.string(), e.what());
  }
  return ExitDataManifest::from_json(json, path.string());
}

}  // namespace selfspec::launch
