#include "core/yaml_json.hpp"

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdint>
#include <string>

namespace selfspec {
namespace {

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

}  // namespace

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

}  // namespace selfspec
