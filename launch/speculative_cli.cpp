#include "launch/speculative_cli.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

namespace selfspec::launch {
namespace {

std::string default_text(const nlohmann::json& fallback) {
  if (fallback.is_null()) return "";
  return fallback.is_string() ? fallback.get<std::string>() : fallback.dump();
}

std::string help_of(SettingSpec spec, bool lists) {
  spec.list = lists && spec.list;
  if (spec.type == SettingType::kChoice && spec.key != "spec" && spec.key != "controller") {
    return fmt::format("{} ({})", spec.help, allowed_values(spec));
  }
  return spec.list ? spec.help + "; a comma-separated list compares them" : spec.help;
}

std::string type_name(const SettingSpec& spec, bool lists) {
  if (lists && spec.list) return "LIST";
  switch (spec.type) {
    case SettingType::kInt:
      return "INT";
    case SettingType::kNumber:
      return "FLOAT";
    case SettingType::kFile:
      return "FILE";
    case SettingType::kIntList:
      return "LIST";
    default:
      return "TEXT";
  }
}

}  // namespace

void SpeculativeCli::add_to(CLI::App& command, bool lists) {
  lists_ = lists;
  auto* group = command.add_option_group("self-speculative decoding");
  for (const SettingSpec& spec : speculative_settings(kinds_)) {
    const std::string name = "--" + spec.key;
    CLI::Option* option = nullptr;
    if (spec.type == SettingType::kFlag) {
      option = group->add_flag(name, flags_[spec.key], help_of(spec, lists));
    } else {
      option = group->add_option(name, text_[spec.key], help_of(spec, lists))
                   ->type_name(type_name(spec, lists));
      if (!spec.fallback.is_null()) option->default_str(default_text(spec.fallback));
    }
    options_.emplace_back(spec.key, option);
  }
}

SpeculativeConfig SpeculativeCli::config() const {
  nlohmann::json settings = nlohmann::json::object();
  for (const auto& [key, option] : options_) {
    if (option->count() == 0) continue;
    const auto flag = flags_.find(key);
    settings[key] =
        flag != flags_.end() ? nlohmann::json(flag->second) : nlohmann::json(text_.at(key));
  }
  return speculative_config(settings, SettingSource::kCommandLine, kinds_, lists_);
}

CLI::Validator setting_validator(SettingSpec spec, bool lists) {
  return CLI::Validator(
      [spec, lists](std::string& value) -> std::string {
        try {
          parse_setting(spec, value, SettingSource::kCommandLine, lists);
        } catch (const Error& e) {
          return e.what();
        }
        return {};
      },
      lists&& spec.list ? "LIST" : "VALUE");
}

CLI::Option* add_max_draft_option(CLI::App& command, int& max_draft) {
  const SettingSpec spec = max_draft_setting();
  return command.add_option("--" + spec.key, max_draft, spec.help)
      ->check(CLI::Range(1, kMaxDraftTokens))
      ->capture_default_str();
}

CLI::Option* add_draft_weights_option(CLI::App& command, std::string& draft_weights) {
  const std::vector<SettingSpec> specs = speculative_settings();
  const SettingSpec& spec = *find_setting(specs, "draft-weights");
  return command.add_option("--" + spec.key, draft_weights, spec.help)
      ->check(CLI::IsMember(spec.choices))
      ->capture_default_str();
}

}  // namespace selfspec::launch
