// Skip sets: loading from YAML/JSON files, CLI lists, the uniform generator, and the conversion to
// a LayerPlan. See skip_set.hpp for the file schema and the exact uniform rule.
#include "draft/skip_set.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <system_error>

namespace selfspec {
namespace {

constexpr std::array<std::string_view, 6> kKeys = {"name",      "source", "num_layers",
                                                   "attention", "mlp",    "draft_vocab"};
constexpr std::string_view kUniformSource =
    "SWIFT §4.1: uniform layer skipping as the starting point of the on-the-fly search";

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  const auto begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  const auto end = text.find_last_not_of(kSpace);
  return text.substr(begin, end - begin + 1);
}

// A decimal integer with an optional sign, nothing else; nullopt otherwise (including overflow).
std::optional<long long> parse_integer(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// "line 3, column 5" for error messages (yaml-cpp marks are 0-based).
std::string where(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return "";
  return fmt::format(" (line {}, column {})", mark.line + 1, mark.column + 1);
}

// A plain (unquoted) scalar holding an integer; quoted strings, floats and booleans are refused.
std::optional<long long> integer_scalar(const YAML::Node& node) {
  if (!node.IsScalar() || node.Tag() == "!") return std::nullopt;
  return parse_integer(node.Scalar());
}

std::string string_value(const std::filesystem::path& file, std::string_view key,
                         const YAML::Node& node) {
  if (!node.IsScalar()) {
    fail("{}: {} must be a string{}", file.string(), key, where(node));
  }
  if (node.Scalar().empty()) fail("{}: {} must not be empty{}", file.string(), key, where(node));
  return node.Scalar();
}

std::vector<int> layer_list(const std::filesystem::path& file, std::string_view key,
                            const YAML::Node& node, std::optional<int> num_layers) {
  if (node.IsNull()) return {};
  if (!node.IsSequence()) {
    fail("{}: {} must be a sequence of layer indices, e.g. [3, 5]{}", file.string(), key,
         where(node));
  }
  std::vector<int> layers;
  std::map<int, std::size_t> first_index;  // layer -> position of its first occurrence
  std::size_t index = 0;
  for (const YAML::Node& entry : node) {
    const std::optional<long long> value = integer_scalar(entry);
    if (!value) {
      fail("{}: {}[{}] = {} is not an integer layer index{}", file.string(), key, index,
           entry.IsScalar() ? fmt::format("'{}'", entry.Scalar()) : std::string("(not a scalar)"),
           where(entry));
    }
    if (*value < 0) {
      fail("{}: {}[{}] = {} is negative (layer indices are 0-based){}", file.string(), key, index,
           *value, where(entry));
    }
    const int limit = num_layers.value_or(LayerPlan::kMaxLayers);
    if (*value >= limit) {
      if (num_layers) {
        fail("{}: {}[{}] = {} is outside [0, {}) (the model has {} layers){}", file.string(), key,
             index, *value, limit, limit, where(entry));
      }
      fail("{}: {}[{}] = {} exceeds the supported maximum layer index {}{}", file.string(), key,
           index, *value, limit - 1, where(entry));
    }
    const int layer = static_cast<int>(*value);
    const auto [it, inserted] = first_index.emplace(layer, index);
    if (!inserted) {
      fail("{}: {}[{}] = {} repeats {}[{}]{}", file.string(), key, index, layer, key, it->second,
           where(entry));
    }
    layers.push_back(layer);
    ++index;
  }
  std::sort(layers.begin(), layers.end());
  return layers;
}

// The draft_vocab sequence: distinct non-negative integer token ids, in file order.
std::vector<std::int32_t> token_list(const std::filesystem::path& file, const YAML::Node& node) {
  if (node.IsNull()) return {};
  if (!node.IsSequence()) {
    fail("{}: draft_vocab must be a sequence of token ids{}", file.string(), where(node));
  }
  std::vector<std::int32_t> ids;
  std::map<std::int32_t, std::size_t> first_index;
  std::size_t index = 0;
  for (const YAML::Node& entry : node) {
    const std::optional<long long> value = integer_scalar(entry);
    if (!value || *value < 0 || *value > std::numeric_limits<std::int32_t>::max()) {
      fail("{}: draft_vocab[{}] = {} is not a token id (an integer >= 0){}", file.string(), index,
           entry.IsScalar() ? fmt::format("'{}'", entry.Scalar()) : std::string("(not a scalar)"),
           where(entry));
    }
    const auto id = static_cast<std::int32_t>(*value);
    const auto [it, inserted] = first_index.emplace(id, index);
    if (!inserted) {
      fail("{}: draft_vocab[{}] = {} repeats draft_vocab[{}]{}", file.string(), index, id,
           it->second, where(entry));
    }
    ids.push_back(id);
    ++index;
  }
  return ids;
}

void check_range(const SkipSet& set, std::string_view key, const std::vector<int>& layers,
                 int model_layers) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] >= model_layers) {
      fail("skip set '{}': {}[{}] = {} is outside [0, {}) (the model has {} layers)", set.name, key,
           i, layers[i], model_layers, model_layers);
    }
  }
}

}  // namespace

LayerPlan SkipSet::plan(int model_layers) const {
  if (num_layers && *num_layers != model_layers) {
    fail("skip set '{}' was made for a model with {} layers, but this model has {}", name,
         *num_layers, model_layers);
  }
  check_range(*this, "attention", attention, model_layers);
  check_range(*this, "mlp", mlp, model_layers);
  return LayerPlan::skipping(model_layers, attention, mlp);
}

std::string SkipSet::describe() const {
  nlohmann::ordered_json json;
  json["name"] = name;
  json["source"] = source;
  if (num_layers) {
    json["num_layers"] = *num_layers;
  } else {
    json["num_layers"] = nullptr;
  }
  json["attention"] = attention;
  json["mlp"] = mlp;
  if (!draft_vocab.empty()) json["draft_vocab_size"] = draft_vocab.size();
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

SkipSet load_skip_set(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    fail("{}: is a directory, not a skip-set file", file.string());
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("{}: cannot open the skip-set file", file.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("{}: cannot read the skip-set file", file.string());

  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    fail("{}: not valid YAML/JSON: {}", file.string(), e.what());
  }
  if (!root.IsMap()) {
    fail(
        "{}: a skip set must be a mapping with keys attention, mlp (and optionally name, source, "
        "num_layers)",
        file.string());
  }

  // Collect the keys first: num_layers bounds the lists, whatever the order in the file.
  std::map<std::string, YAML::Node, std::less<>> values;
  try {
    for (const auto& entry : root) {
      const YAML::Node& key_node = entry.first;
      if (!key_node.IsScalar()) fail("{}: a key is not a string{}", file.string(), where(key_node));
      const std::string key = key_node.Scalar();
      if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
        fail(
            "{}: unknown key '{}'{} (known keys: name, source, num_layers, attention, mlp, "
            "draft_vocab)",
            file.string(), key, where(key_node));
      }
      if (!values.emplace(key, entry.second).second) {
        fail("{}: key '{}' appears more than once{}", file.string(), key, where(key_node));
      }
    }

    SkipSet set;
    set.name = file.stem().string();
    if (const auto it = values.find("name"); it != values.end()) {
      set.name = string_value(file, "name", it->second);
    }
    if (const auto it = values.find("source"); it != values.end()) {
      set.source = string_value(file, "source", it->second);
    }
    if (const auto it = values.find("num_layers"); it != values.end()) {
      const std::optional<long long> value = integer_scalar(it->second);
      if (!value || *value < 1 || *value > LayerPlan::kMaxLayers) {
        fail("{}: num_layers = {} is not an integer in [1, {}]{}", file.string(),
             it->second.IsScalar() ? fmt::format("'{}'", it->second.Scalar())
                                   : std::string("(not a scalar)"),
             LayerPlan::kMaxLayers, where(it->second));
      }
      set.num_layers = static_cast<int>(*value);
    }
    if (const auto it = values.find("attention"); it != values.end()) {
      set.attention = layer_list(file, "attention", it->second, set.num_layers);
    }
    if (const auto it = values.find("mlp"); it != values.end()) {
      set.mlp = layer_list(file, "mlp", it->second, set.num_layers);
    }
    if (const auto it = values.find("draft_vocab"); it != values.end()) {
      set.draft_vocab = token_list(file, it->second);
    }
    return set;
  } catch (const YAML::Exception& e) {
    fail("{}: {}", file.string(), e.what());
  }
}

void save_skip_set(const std::filesystem::path& file, const SkipSet& set) {
  nlohmann::ordered_json json;
  if (!set.name.empty()) json["name"] = set.name;  // else the reader names it after the file
  if (!set.source.empty()) json["source"] = set.source;
  if (set.num_layers) json["num_layers"] = *set.num_layers;
  json["attention"] = set.attention;
  json["mlp"] = set.mlp;
  if (!set.draft_vocab.empty()) json["draft_vocab"] = set.draft_vocab;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) fail("{}: cannot open the skip-set file for writing", file.string());
  out << json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
  out.close();
  if (!out) fail("{}: cannot write the skip-set file", file.string());
}

std::vector<int> parse_layer_list(std::string_view text, std::string_view option) {
  std::vector<int> layers;
  if (trim(text).empty()) return layers;
  std::map<int, std::size_t> first_item;  // layer -> 1-based item number of its first occurrence
  std::size_t item_number = 0;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = text.find(',', begin);
    const std::string_view raw = text.substr(
        begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    const std::string_view item = trim(raw);
    ++item_number;
    if (item.empty()) {
      fail("{}: item {} of '{}' is empty (expected comma-separated layer indices, e.g. 3,5,9)",
           option, item_number, text);
    }
    const std::optional<long long> value = parse_integer(item);
    if (!value) fail("{}: item {} ('{}') is not an integer layer index", option, item_number, item);
    if (*value < 0) {
      fail("{}: item {} ('{}') is negative (layer indices are 0-based)", option, item_number, item);
    }
    if (*value >= LayerPlan::kMaxLayers) {
      fail("{}: item {} ('{}') exceeds the supported maximum layer index {}", option, item_number,
           item, LayerPlan::kMaxLayers - 1);
    }
    const int layer = static_cast<int>(*value);
    const auto [it, inserted] = first_item.emplace(layer, item_number);
    if (!inserted) {
      fail("{}: item {} ('{}') repeats item {}", option, item_number, item, it->second);
    }
    layers.push_back(layer);
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  std::sort(layers.begin(), layers.end());
  return layers;
}

SkipSet uniform_skip_set(int num_layers, double ratio) {
  if (!(ratio >= 0.0 && ratio < 1.0)) {
    fail("uniform skip set: ratio {} is outside [0, 1)", ratio);
  }
  if (num_layers < 1 || num_layers > LayerPlan::kMaxLayers) {
    fail("uniform skip set: num_layers {} is outside [1, {}]", num_layers, LayerPlan::kMaxLayers);
  }
  const int total = 2 * num_layers;
  const int n = static_cast<int>(std::lround(ratio * total));
  const int interior = std::max(0, num_layers - 2);  // layers 1 .. L-2

  std::vector<int> sublayers;  // s = 2l (attention l) or 2l+1 (MLP l)
  if (n <= 2 * interior) {
    // Whole layers, as the centres of m equal bins of the interior layers.
    const int m = (n + 1) / 2;
    for (int k = 0; k < m; ++k) {
      const int layer = 1 + static_cast<int>((2LL * k + 1) * interior / (2LL * m));
      sublayers.push_back(2 * layer);
      // With n odd, the middle chosen layer keeps its MLP (attention is the more redundant
      // sublayer in published skip sets, e.g. Draft & Verify's).
      if (n % 2 == 0 || k != m / 2) sublayers.push_back(2 * layer + 1);
    }
  } else {
    for (int l = 1; l <= interior; ++l) {
      sublayers.push_back(2 * l);
      sublayers.push_back(2 * l + 1);
    }
    // Then the first and last layers: innermost first, alternating ends.
    const std::array<int, 4> edges = {1, total - 2, 0, total - 1};
    for (int s : edges) {
      if (static_cast<int>(sublayers.size()) == n) break;
      if (std::find(sublayers.begin(), sublayers.end(), s) == sublayers.end()) {
        sublayers.push_back(s);
      }
    }
  }

  SkipSet set;
  set.name = fmt::format("uniform-r{}", ratio);
  set.source = std::string(kUniformSource);
  set.num_layers = num_layers;
  for (int s : sublayers) (s % 2 == 0 ? set.attention : set.mlp).push_back(s / 2);
  std::sort(set.attention.begin(), set.attention.end());
  std::sort(set.mlp.begin(), set.mlp.end());
  return set;
}

}  // namespace selfspec
