// find_hf_chat_template (see hf_chat_template.hpp).
#include "tokenizer/hf_chat_template.hpp"

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <system_error>

namespace selfspec {
namespace {

using nlohmann::json;

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("{}: cannot open", file.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A special token entry: "text", {"content": "text", ...} or null.
std::string token_text(const json& config, const char* key, const std::filesystem::path& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  fail("{}: key \"{}\": expected a string or an object with \"content\"", file.string(), key);
}

// The "chat_template" value: a string, or the entry named "default" of a list of named ones.
std::optional<std::string> template_source(const json& config, const std::filesystem::path& file) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const json& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    fail("{}: key \"chat_template\": a list of templates without one named \"default\"",
         file.string());
  }
  fail("{}: key \"chat_template\": expected a string or a list of named templates", file.string());
}

}  // namespace

std::optional<ChatTemplate> find_hf_chat_template(const std::filesystem::path& model_dir) {
  std::error_code ec;
  const std::filesystem::path config_file = model_dir / "tokenizer_config.json";
  const std::filesystem::path jinja_file = model_dir / "chat_template.jinja";
  json config = json::object();
  if (std::filesystem::is_regular_file(config_file, ec)) {
    try {
      config = json::parse(read_text(config_file));
    } catch (const json::exception& e) {
      fail("{}: malformed JSON: {}", config_file.string(), e.what());
    }
    SELFSPEC_CHECK(config.is_object(), "{}: expected a JSON object", config_file.string());
  }
  const ChatTemplate::SpecialTexts specials{token_text(config, "bos_token", config_file),
                                            token_text(config, "eos_token", config_file)};
  if (std::filesystem::is_regular_file(jinja_file, ec)) {
    return ChatTemplate(read_text(jinja_file), specials, jinja_file.string());
  }
  if (std::optional<std::string> source = template_source(config, config_file)) {
    return ChatTemplate(std::move(*source), specials,
                        fmt::format("{}: key chat_template", config_file.string()));
  }
  return std::nullopt;
}

}  // namespace selfspec
