// An EnvironmentLookup (comm/launcher_environment.hpp) over a fixed set of variables, for tests of
// what the launcher's environment decides.
#pragma once

#include "comm/launcher_environment.hpp"

#include <map>
#include <string>
#include <utility>

namespace selfspec::testing {

inline EnvironmentLookup fake_environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace selfspec::testing
