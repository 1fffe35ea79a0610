// A setting a user gives from any source (a command-line option, a run config's key, a field of a
// JSON request), declared once: its key, its type, the values it allows and its default.
// parse_setting() checks a value against the declaration and returns the typed JSON value the code
// reads, so every bad value, whatever its source, gets the same error: the field's name as that
// source spells it, what it allows, and what was given, e.g.
//   --max-draft must be an integer in [1, 63] (got 64)
//   "controller" must be one of fixed, threshold, adaptive, thompson, cali-ts (got "oracle")
// Written by hand: CLI11's validators serve the command line only, and a server request or a
// library caller must be checked by the same rules without it.
#pragma once

#include <nlohmann/json.hpp>

#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

enum class SettingType {
  kInt,      // a whole number within [min, max]
  kNumber,   // a finite number within [min, max] (bounds open where said)
  kChoice,   // one of `choices`
  kText,     // any string
  kFile,     // a path to an existing file
  kFlag,     // a boolean
  kIntList,  // whole numbers within [min, max]: a JSON array, or "1,3,9" from a command line
};

// How a message names a field: as its command-line option (--max-draft) or its JSON key.
enum class SettingSource { kCommandLine, kJson };

struct SettingSpec {
  std::string key{};  // "max-draft": the option --max-draft, the run config's and JSON's key
  SettingType type = SettingType::kText;
  std::string help{};
  nlohmann::json fallback{};  // the default (null: none; the setting is absent unless given)
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;               // kNumber: (min, ...
  bool max_open = false;               // kNumber: ..., max)
  std::vector<std::string> choices{};  // kChoice
  // A command line may give a comma-separated list of values (bench compares them); the parsed
  // value is then a JSON array of typed values.
  bool list = false;
};

// "--max-draft" (command line) or "\"max-draft\"" (JSON).
std::string setting_name(std::string_view key, SettingSource source);

// What a spec allows, for messages and --help: "an integer in [1, 63]", "one of a, b".
std::string allowed_values(const SettingSpec& spec);

// Checks `value` against `spec` and returns it typed (a string from a command line is converted;
// with `lists` and spec.list, a comma-separated string gives an array). Throws selfspec::Error
// "NAME must be ALLOWED (got VALUE)" otherwise.
nlohmann::json parse_setting(const SettingSpec& spec, const nlohmann::json& value,
                             SettingSource source, bool lists = false);

// The spec of `key` among `specs`, or nullptr.
const SettingSpec* find_setting(std::span<const SettingSpec> specs, std::string_view key);

// "a,b" -> {"a", "b"}; "" -> {""}.
std::vector<std::string> split_list(const std::string& text);

}  // namespace selfspec
