#include "model_io/architecture_file.hpp"

#include "core/error.hpp"
#include "core/yaml_json.hpp"

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string_view>

namespace selfspec {

ArchitectureFile load_architecture_file(const std::filesystem::path& path) {
  const std::string where = path.string();
  SELFSPEC_CHECK(std::filesystem::is_regular_file(path), "--architecture {}: no such file", where);
  nlohmann::json document;
  try {
    document = yaml_to_json(YAML::LoadFile(where));  // YAML, or JSON (a subset of YAML)
  } catch (const YAML::Exception& error) {
    fail("--architecture {}: not valid YAML or JSON: {}", where, error.what());
  }
  SELFSPEC_CHECK(document.is_object(), "--architecture {}: expected a mapping", where);

  ArchitectureFile file;
  file.name = path.stem().string();
  const auto config = document.find("config");
  if (config == document.end()) {
    // A bare config.json.
    file.config = ModelConfig::from_json(document, where);
    return file;
  }
  for (const auto& [key, value] : document.items()) {
    if (key == "config") continue;
    if (key == "name" || key == "source") {
      SELFSPEC_CHECK(value.is_string(), "{}: key '{}' must be a string", where, key);
      (key == "name" ? file.name : file.source) = value.get<std::string>();
      continue;
    }
    fail("{}: unknown key '{}' (an architecture file has name, source and config)", where, key);
  }
  file.config = ModelConfig::from_json(*config, where + " (config)");
  return file;
}

}  // namespace selfspec
