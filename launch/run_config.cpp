#include "launch/run_config.hpp"

#include "core/error.hpp"
#include "core/setting_spec.hpp"
#include "speculative/speculative_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <vector>

namespace selfspec::launch {
namespace {

std::string normalise_key(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

// Options that stand in for one another: when the command line gives one, the file's values for
// all of them are dropped (a run config naming an architecture still works with --model DIR).
const std::vector<std::vector<std::string>> kAlternatives = {
    {"model", "architecture"},
    {"prompt", "prompt-ids"},
    {"skip-config", "skip-uniform", "skip-attn", "skip-mlp"},
};

// True when argv[from..] gives `--name` (as "--name", "--name=value").
bool given_on_command_line(int argc, char** argv, int from, const std::string& name) {
  const std::string flag = "--" + name;
  for (int i = from; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == flag || arg.starts_with(flag + "=")) return true;
  }
  return false;
}

// True when argv[from..] sets `--name value` or `--name=value` to `value`.
bool set_on_command_line(int argc, char** argv, const std::string& name, std::string_view value) {
  const std::string flag = "--" + name;
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == flag && i + 1 < argc && argv[i + 1] == value) return true;
    if (arg == flag + "=" + std::string(value)) return true;
  }
  return false;
}

bool overridden_on_command_line(int argc, char** argv, const std::string& key) {
  if (given_on_command_line(argc, argv, 2, key)) return true;
  // `--spec none` turns a speculative run config into its autoregressive baseline.
  if (set_on_command_line(argc, argv, "spec", "none") &&
      std::find(kAlternatives[2].begin(), kAlternatives[2].end(), key) != kAlternatives[2].end()) {
    return true;
  }
  for (const std::vector<std::string>& group : kAlternatives) {
    if (std::find(group.begin(), group.end(), key) == group.end()) continue;
    for (const std::string& other : group) {
      if (given_on_command_line(argc, argv, 2, other)) return true;
    }
  }
  return false;
}

const CLI::Option* find_option(const CLI::App& command, const std::string& name) {
  return const_cast<CLI::App&>(command).get_option_no_throw("--" + name);
}

bool any_subcommand_has(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (find_option(*sub, name) != nullptr) return true;
  }
  return false;
}

std::string scalar_text(const YAML::Node& node) {
  return node.as<std::string>();
}

// Options naming input files: a relative path in a run config is relative to the config file, so
// a config works from any directory (outputs — --out, --trace — stay relative to the caller's).
// Besides the model's, every self-speculative setting declared as a file (a drafter kind's head
// or skip set, the draft vocabulary: SettingType::kFile), so that a new kind's files need no entry
// here.
bool is_input_path(const std::string& key) {
  static const std::set<std::string> keys = [] {
    std::set<std::string> files = {"model", "architecture", "tokenizer", "cali-predictor"};
    for (const SettingSpec& setting : speculative_settings()) {
      if (setting.type == SettingType::kFile) files.insert(setting.key);
    }
    return files;
  }();
  return keys.count(key) > 0;
}

std::string resolve_input_path(const std::string& value, const std::filesystem::path& file) {
  const std::filesystem::path path(value);
  if (path.is_absolute() || value.empty()) return value;
  return (file.parent_path() / path).lexically_normal().string();
}

struct Leaf {
  std::string key;
  YAML::Node value;
};

void flatten(const YAML::Node& map, const std::string& file, std::vector<Leaf>& out) {
  for (const auto& item : map) {
    const std::string key = normalise_key(item.first.as<std::string>());
    const YAML::Node& value = item.second;
    if (value.IsMap()) {
      flatten(value, file, out);
    } else {
      out.push_back({key, value});
    }
  }
}

}  // namespace

std::vector<std::string> expand_run_config(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (argc < 3) return args;
  std::optional<std::string> file;
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--config" && i + 1 < argc) file = argv[i + 1];
    if (arg.starts_with("--config=")) file = std::string(arg.substr(9));
  }
  if (!file) return args;
  const CLI::App* command = nullptr;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == argv[1]) command = sub;
  }
  if (command == nullptr) return args;  // the caller reports the unknown subcommand

  SELFSPEC_CHECK(std::filesystem::is_regular_file(*file), "--config {}: no such file", *file);
  YAML::Node root;
  try {
    root = YAML::LoadFile(*file);
  } catch (const YAML::Exception& error) {
    fail("--config {}: not valid YAML: {}", *file, error.what());
  }
  if (root.IsNull()) return args;
  SELFSPEC_CHECK(root.IsMap(), "--config {}: expected a mapping of option names to values", *file);
  std::vector<Leaf> leaves;
  flatten(root, *file, leaves);

  std::vector<std::string> inserted;
  for (const Leaf& leaf : leaves) {
    if (leaf.key == "config") fail("--config {}: a run config cannot name another config", *file);
    const CLI::Option* option = find_option(*command, leaf.key);
    if (option == nullptr) {
      if (any_subcommand_has(app, leaf.key)) continue;  // meant for another subcommand
      fail("--config {}: unknown key '{}' (not an option of any selfspec command)", *file,
           leaf.key);
    }
    if (overridden_on_command_line(argc, argv, leaf.key)) continue;  // the command line wins
    const bool flag = option->get_expected_max() == 0;
    try {
      if (flag) {
        if (leaf.value.as<bool>()) inserted.push_back("--" + leaf.key);
      } else if (leaf.value.IsSequence()) {
        std::string joined;
        for (const auto& element : leaf.value) {
          joined += (joined.empty() ? "" : ",") + scalar_text(element);
        }
        inserted.push_back("--" + leaf.key + "=" + joined);
      } else if (leaf.value.IsScalar()) {
        std::string value = scalar_text(leaf.value);
        if (is_input_path(leaf.key)) value = resolve_input_path(value, *file);
        inserted.push_back("--" + leaf.key + "=" + value);
      } else {
        fail("--config {}: key '{}' has no value", *file, leaf.key);
      }
    } catch (const YAML::Exception& error) {
      fail("--config {}: key '{}': {}", *file, leaf.key, error.what());
    }
  }
  // After the subcommand and before the user's own arguments.
  args.insert(args.begin() + 2, inserted.begin(), inserted.end());
  return args;
}

}  // namespace selfspec::launch
