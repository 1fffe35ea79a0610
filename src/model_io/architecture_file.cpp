#include "model_io/architecture_file.hpp"

#include "core/error.hpp"

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <string_view>

namespace selfspec {
namespace {

// YAML 1.2 core-schema typing of a plain scalar (yaml-cpp leaves every scalar a string): null,
// booleans, integers and floats; quoted scalars stay strings.
nlohmann::json scalar_to_json(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  std::int64_t integer = 0;
  if (auto [end, ec] = std::from_chars(first, last, integer); ec == std::errc() && end == last) {
    return integer;
  }
  double number = 0.0;
  if (auto [end, ec] = std::from_chars(first, last, number); ec == std::errc() && end == last) {
    return number;
  }
  return text;
}

nlohmann::json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar_to_json(node);
    case YAML::NodeType::Sequence: {
      nlohmann::json array = nlohmann::json::array();
      for (const YAML::Node& element : node) array.push_back(yaml_to_json(element));
      return array;
    }
    case YAML::NodeType::Map: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& item : node)
        object[item.first.as<std::string>()] = yaml_to_json(item.second);
      return object;
    }
  }
  return nullptr;
}

}  // namespace

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
