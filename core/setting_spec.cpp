#include "core/setting_spec.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>

namespace selfspec {
namespace {

bool bounded_below(const SettingSpec& spec) {
  return std::isfinite(spec.min);
}
bool bounded_above(const SettingSpec& spec) {
  return std::isfinite(spec.max);
}

std::string bound(double value, bool whole) {
  return whole ? fmt::format("{}", static_cast<long long>(value)) : fmt::format("{}", value);
}

// "in [1, 63]", ">= 0", "in (0, 1)", "" (unbounded).
std::string range_text(const SettingSpec& spec, bool whole) {
  const bool open_min = !whole && spec.min_open;
  const bool open_max = !whole && spec.max_open;
  if (bounded_below(spec) && bounded_above(spec)) {
    return fmt::format(" in {}{}, {}{}", open_min ? "(" : "[", bound(spec.min, whole),
                       bound(spec.max, whole), open_max ? ")" : "]");
  }
  if (bounded_below(spec))
    return fmt::format(" {} {}", open_min ? ">" : ">=", bound(spec.min, whole));
  if (bounded_above(spec))
    return fmt::format(" {} {}", open_max ? "<" : "<=", bound(spec.max, whole));
  return "";
}

bool in_range(const SettingSpec& spec, double value) {
  const bool above_min = spec.min_open ? value > spec.min : value >= spec.min;
  const bool below_max = spec.max_open ? value < spec.max : value <= spec.max;
  return above_min && below_max;  // false for NaN
}

std::string shown(const nlohmann::json& value) {
  if (value.is_string()) return fmt::format("'{}'", value.get<std::string>());
  if (value.is_number_float()) return fmt::format("{}", value.get<double>());  // nan, inf too
  return value.dump();
}

[[noreturn]] void refuse(const SettingSpec& spec, SettingSource source, const nlohmann::json& got) {
  fail("{} must be {} (got {})", setting_name(spec.key, source), allowed_values(spec), shown(got));
}

std::optional<long long> whole_number(const nlohmann::json& value, SettingSource source) {
  if (value.is_number_integer()) return value.get<long long>();
  if (value.is_string() && source == SettingSource::kCommandLine) {
    const std::string text = value.get<std::string>();
    long long parsed = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
    if (error == std::errc{} && end == text.data() + text.size() && !text.empty()) return parsed;
  }
  return std::nullopt;
}

std::optional<double> real_number(const nlohmann::json& value, SettingSource source) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string() && source == SettingSource::kCommandLine) {
    const std::string text = value.get<std::string>();
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size()) return parsed;
  }
  return std::nullopt;
}

nlohmann::json parse_int_list(const SettingSpec& spec, const nlohmann::json& value,
                              SettingSource source) {
  nlohmann::json items = nlohmann::json::array();
  if (value.is_array()) {
    items = value;
  } else if (value.is_string() && source == SettingSource::kCommandLine) {
    const std::string text = value.get<std::string>();
    if (!text.empty()) {
      for (const std::string& item : split_list(text)) items.push_back(item);
    }
  } else {
    refuse(spec, source, value);
  }
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& item : items) {
    const std::optional<long long> number = whole_number(item, source);
    if (!number || !in_range(spec, static_cast<double>(*number))) refuse(spec, source, value);
    out.push_back(*number);
  }
  return out;
}

nlohmann::json parse_one(const SettingSpec& spec, const nlohmann::json& value,
                         SettingSource source) {
  switch (spec.type) {
    case SettingType::kInt: {
      const std::optional<long long> number = whole_number(value, source);
      if (!number || !in_range(spec, static_cast<double>(*number))) refuse(spec, source, value);
      return *number;
    }
    case SettingType::kNumber: {
      const std::optional<double> number = real_number(value, source);
      if (!number || !std::isfinite(*number) || !in_range(spec, *number)) {
        refuse(spec, source, value);
      }
      return *number;
    }
    case SettingType::kChoice: {
      if (!value.is_string()) refuse(spec, source, value);
      const std::string text = value.get<std::string>();
      if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
        refuse(spec, source, value);
      }
      return text;
    }
    case SettingType::kText:
      if (!value.is_string()) refuse(spec, source, value);
      return value;
    case SettingType::kFile: {
      if (!value.is_string()) refuse(spec, source, value);
      std::error_code error;
      if (!std::filesystem::is_regular_file(value.get<std::string>(), error)) {
        refuse(spec, source, value);
      }
      return value;
    }
    case SettingType::kFlag:
      if (value.is_boolean()) return value;
      if (source == SettingSource::kCommandLine && value.is_string()) {
        const std::string text = value.get<std::string>();
        if (text == "true" || text == "1") return true;
        if (text == "false" || text == "0") return false;
      }
      refuse(spec, source, value);
    case SettingType::kIntList:
      return parse_int_list(spec, value, source);
  }
  fail("{}: unknown setting type {}", setting_name(spec.key, source), static_cast<int>(spec.type));
}

}  // namespace

std::string setting_name(std::string_view key, SettingSource source) {
  return source == SettingSource::kCommandLine ? fmt::format("--{}", key)
                                               : fmt::format("\"{}\"", key);
}

std::string allowed_values(const SettingSpec& spec) {
  std::string one;
  switch (spec.type) {
    case SettingType::kInt:
      one = "an integer" + range_text(spec, true);
      break;
    case SettingType::kNumber:
      one = "a number" + range_text(spec, false);
      break;
    case SettingType::kChoice:
      one = fmt::format("one of {}", fmt::join(spec.choices, ", "));
      break;
    case SettingType::kText:
      one = "a string";
      break;
    case SettingType::kFile:
      one = "an existing file";
      break;
    case SettingType::kFlag:
      one = "true or false";
      break;
    case SettingType::kIntList:
      one = "a list of integers" + range_text(spec, true);
      break;
  }
  return spec.list ? one + " (or a comma-separated list of them)" : one;
}

nlohmann::json parse_setting(const SettingSpec& spec, const nlohmann::json& value,
                             SettingSource source, bool lists) {
  if (!(lists && spec.list)) {
    SettingSpec one = spec;
    one.list = false;  // messages offer no list where none is taken
    return parse_one(one, value, source);
  }
  nlohmann::json items = nlohmann::json::array();
  if (value.is_array()) {
    for (const nlohmann::json& item : value) items.push_back(parse_one(spec, item, source));
  } else if (value.is_string() && source == SettingSource::kCommandLine) {
    for (const std::string& item : split_list(value.get<std::string>())) {
      items.push_back(parse_one(spec, item, source));
    }
  } else {
    items.push_back(parse_one(spec, value, source));
  }
  return items;
}

const SettingSpec* find_setting(std::span<const SettingSpec> specs, std::string_view key) {
  const auto it = std::find_if(specs.begin(), specs.end(),
                               [&](const SettingSpec& spec) { return spec.key == key; });
  return it == specs.end() ? nullptr : &*it;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

}  // namespace selfspec
