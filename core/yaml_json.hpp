// YAML documents as JSON value trees, so that one checker reads a file in either format (YAML 1.2
// is a superset of JSON): architecture files, comm tables. Plain scalars get the YAML 1.2 core
// schema's types (yaml-cpp leaves every scalar a string): null, booleans, integers, floats, text
// otherwise; quoted scalars stay text.
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace YAML {
class Node;
}

namespace selfspec {

nlohmann::json yaml_to_json(const YAML::Node& node);

}  // namespace selfspec
