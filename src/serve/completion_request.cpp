// parse_completion_request(): the OpenAI request body checked field by field. Inside, a refusal
// is thrown as a Rejection carrying its ApiError and caught at the top, together with anything the
// JSON library throws, so the public function never throws. Unknown keys are refused first, then
// the required fields (model, prompt or messages), then every optional one; null counts as absent
// for every optional parameter, as OpenAI's API treats it.
#include "serve/completion_request.hpp"

#include "control/draft_length_controller.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>
#include <iterator>
#include <limits>
#include <utility>

namespace selfspec::serve {
namespace {

using nlohmann::json;

// A refusal on its way to parse_completion_request's catch.
struct Rejection {
  ApiError error;
};

[[noreturn]] void reject(std::string param, std::string message, int status = 400) {
  ApiError error;
  error.status = status;
  error.message = std::move(message);
  error.param = std::move(param);
  throw Rejection{std::move(error)};
}

// A client-given text quoted in a message: at most 64 bytes, cut at a UTF-8 character boundary.
std::string quote_text(std::string_view text) {
  constexpr std::size_t kMaxQuoted = 64;
  if (text.size() <= kMaxQuoted) return fmt::format("'{}'", text);
  std::size_t cut = kMaxQuoted;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("'{}...'", text.substr(0, cut));
}

// The JSON type of `value` as a message names it ("string", "number", "array", ...).
std::string_view type_of(const json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number_float()) return "number";
  return value.type_name();
}

[[noreturn]] void wrong_type(const std::string& param, std::string_view expected,
                             const json& value) {
  reject(param, fmt::format("{} must be {} (got {})", param, expected, type_of(value)));
}

[[noreturn]] void unsupported(const std::string& param, std::string_view allowed) {
  reject(param,
         fmt::format("{} is not supported by this server (only {} is accepted)", param, allowed));
}

[[noreturn]] void unrecognized(const std::string& param, std::string_view allowed) {
  reject(param,
         fmt::format("Unrecognized request argument supplied: {}{}", param,
                     allowed.empty() ? std::string() : fmt::format(" (allowed: {})", allowed)));
}

// An integer's value; integers above int64's range saturate (they only ever mean "very many").
std::int64_t int64_of(const json& value) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    return static_cast<std::int64_t>(std::min(u, kMax));
  }
  return value.get<std::int64_t>();
}

std::int64_t as_integer(const json& value, const std::string& param) {
  if (!value.is_number_integer()) wrong_type(param, "an integer", value);
  return int64_of(value);
}

double as_number(const json& value, const std::string& param) {
  if (!value.is_number()) wrong_type(param, "a number", value);
  return value.get<double>();
}

bool as_boolean(const json& value, const std::string& param) {
  if (!value.is_boolean()) wrong_type(param, "a boolean", value);
  return value.get<bool>();
}

const std::string& as_string(const json& value, const std::string& param) {
  if (!value.is_string()) wrong_type(param, "a string", value);
  return value.get_ref<const std::string&>();
}

// The body's member `key`, or nullptr when it is absent or null.
const json* member(const json& object, std::string_view key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

// Every top-level key we know; the rest are refused as OpenAI refuses them.
constexpr std::string_view kKnownKeys[] = {"model",
                                           "prompt",
                                           "messages",
                                           "max_tokens",
                                           "max_completion_tokens",
                                           "temperature",
                                           "top_p",
                                           "top_k",
                                           "seed",
                                           "n",
                                           "stop",
                                           "stream",
                                           "stream_options",
                                           "speculative",
                                           "ignore_eos",
                                           "user",
                                           "frequency_penalty",
                                           "presence_penalty",
                                           "logprobs",
                                           "top_logprobs",
                                           "echo",
                                           "best_of",
                                           "logit_bias",
                                           "suffix",
                                           "parallel_tool_calls",
                                           "response_format",
                                           "tools",
                                           "tool_choice",
                                           "metadata",
                                           "store",
                                           "service_tier"};

class RequestParser {
 public:
  RequestParser(const json& body, Endpoint endpoint) : body_(body) { request_.endpoint = endpoint; }

  CompletionRequest parse() {
    check_keys();
    parse_model();
    if (request_.endpoint == Endpoint::kCompletions) {
      parse_prompt();
    } else {
      parse_messages();
    }
    parse_max_tokens();
    parse_sampling();
    parse_stop();
    parse_stream();
    parse_speculative();
    check_neutral_parameters();
    return std::move(request_);
  }

 private:
  void check_keys() const {
    for (const auto& [key, value] : body_.items()) {
      if (std::find(std::begin(kKnownKeys), std::end(kKnownKeys), key) == std::end(kKnownKeys)) {
        unrecognized(key, "");
      }
    }
  }

  void parse_model() {
    const json* model = member(body_, "model");
    if (model == nullptr) reject("model", "you must provide a model parameter");
    request_.model = as_string(*model, "model");
    if (request_.model.empty()) reject("model", "model must be a non-empty string");
  }

  void parse_prompt() {
    if (member(body_, "messages") != nullptr) {
      reject("messages",
             "messages is not accepted by /v1/completions: send chat messages to "
             "/v1/chat/completions, or a prompt here");
    }
    const json* prompt = member(body_, "prompt");
    if (prompt == nullptr) reject("prompt", "you must provide a prompt parameter");
    if (prompt->is_array()) {
      if (prompt->size() != 1 || !(*prompt)[0].is_string()) {
        reject("prompt",
               "only one text prompt per request: prompt must be a string or an array of one "
               "string (token-id prompts and several prompts are not supported)");
      }
      request_.prompt = (*prompt)[0].get<std::string>();
    } else if (prompt->is_string()) {
      request_.prompt = prompt->get<std::string>();
    } else {
      wrong_type("prompt", "a string or an array of one string", *prompt);
    }
    if (request_.prompt.empty()) reject("prompt", "prompt must not be empty");
  }

  void parse_messages() {
    if (member(body_, "prompt") != nullptr) {
      reject("prompt",
             "prompt is not accepted by /v1/chat/completions: send messages here, or a prompt to "
             "/v1/completions");
    }
    const json* messages = member(body_, "messages");
    if (messages == nullptr) reject("messages", "you must provide a messages parameter");
    if (!messages->is_array()) wrong_type("messages", "an array of message objects", *messages);
    if (messages->empty()) reject("messages", "messages must be a non-empty array");
    request_.messages.reserve(messages->size());
    for (std::size_t i = 0; i < messages->size(); ++i) {
      request_.messages.push_back(parse_message((*messages)[i], fmt::format("messages[{}]", i)));
    }
  }

  static ChatMessage parse_message(const json& message, const std::string& path) {
    if (!message.is_object()) wrong_type(path, "an object", message);
    for (const auto& [key, value] : message.items()) {
      if (key == "role" || key == "content" || key == "name") continue;
      // What some clients send along with assistant turns, harmless when empty.
      const bool empty = value.is_null() || (value.is_array() && value.empty());
      if ((key == "tool_calls" || key == "function_call" || key == "refusal") && empty) continue;
      if (key == "tool_calls" || key == "function_call" || key == "tool_call_id") {
        reject(path + "." + key,
               fmt::format("{}.{} is not supported by this server (no tool calls)", path, key));
      }
      unrecognized(path + "." + key, "role, content, name");
    }
    ChatMessage result;
    const json* role = member(message, "role");
    if (role == nullptr) {
      reject(path + ".role", fmt::format("{}.role is required (system, user or assistant)", path));
    }
    result.role = as_string(*role, path + ".role");
    if (result.role == "developer") result.role = "system";
    if (result.role != "system" && result.role != "user" && result.role != "assistant") {
      const bool tool_role = result.role == "tool" || result.role == "function";
      reject(path + ".role",
             fmt::format("{}.role {} is not supported: roles are system, user and assistant "
                         "(developer is taken as system){}",
                         path, quote_text(result.role),
                         tool_role ? "; this server does not support tool calls" : ""));
    }
    if (const json* name = member(message, "name")) as_string(*name, path + ".name");
    const json* content = member(message, "content");
    if (content == nullptr) {
      reject(path + ".content",
             fmt::format("{}.content is required (a string or an array of text parts)", path));
    }
    if (content->is_string()) {
      result.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (std::size_t j = 0; j < content->size(); ++j) {
        result.content += text_part((*content)[j], fmt::format("{}.content[{}]", path, j));
      }
    } else {
      wrong_type(path + ".content", "a string or an array of text parts", *content);
    }
    return result;
  }

  // One content part, {"type": "text", "text": "..."}: its text.
  static const std::string& text_part(const json& part, const std::string& path) {
    if (!part.is_object()) wrong_type(path, "an object {\"type\": \"text\", \"text\": ...}", part);
    const json* type = member(part, "type");
    if (type == nullptr) reject(path + ".type", fmt::format("{}.type is required", path));
    const std::string& type_name = as_string(*type, path + ".type");
    if (type_name != "text") {
      reject(path + ".type",
             fmt::format("{}.type {}: content parts of this type are not supported by this "
                         "server; only \"text\" parts are (no images, audio or files)",
                         path, quote_text(type_name)));
    }
    for (const auto& [key, value] : part.items()) {
      if (key != "type" && key != "text") unrecognized(path + "." + key, "type, text");
    }
    const json* text = member(part, "text");
    if (text == nullptr) reject(path + ".text", fmt::format("{}.text is required", path));
    return as_string(*text, path + ".text");
  }

  void parse_max_tokens() {
    std::optional<std::int64_t> max_tokens;
    for (const char* param : {"max_tokens", "max_completion_tokens"}) {
      const json* value = member(body_, param);
      if (value == nullptr) continue;
      const std::int64_t n = as_integer(*value, param);
      if (n < 1) {
        reject(param, fmt::format("{} must be at least 1 (or null: until the context is full); "
                                  "got {}",
                                  param, n));
      }
      if (max_tokens.has_value() && *max_tokens != n) {
        reject(param, fmt::format("max_tokens ({}) and max_completion_tokens ({}) differ: give one "
                                  "of them",
                                  *max_tokens, n));
      }
      max_tokens = n;
    }
    request_.max_tokens = max_tokens;
  }

  void parse_sampling() {
    if (const json* value = member(body_, "temperature")) {
      const double t = as_number(*value, "temperature");
      if (!(t >= 0.0 && t <= 2.0)) {
        reject("temperature", fmt::format("temperature must be between 0 and 2; got {}", t));
      }
      request_.temperature = t;
    }
    if (const json* value = member(body_, "top_p")) {
      const double p = as_number(*value, "top_p");
      if (!(p > 0.0 && p <= 1.0)) {
        reject("top_p", fmt::format("top_p must be greater than 0 and at most 1; got {}", p));
      }
      request_.top_p = p;
    }
    if (const json* value = member(body_, "top_k")) {
      const std::int64_t k = as_integer(*value, "top_k");
      if (k < -1) {
        reject("top_k", fmt::format("top_k must be at least 1, or 0 or -1 for off; got {}", k));
      }
      request_.top_k = std::max<std::int64_t>(k, 0);
    }
    if (const json* value = member(body_, "seed")) {
      if (!value->is_number_integer()) wrong_type("seed", "an integer", *value);
      request_.seed = value->is_number_unsigned()
                          ? value->get<std::uint64_t>()
                          : static_cast<std::uint64_t>(value->get<std::int64_t>());
    }
    if (const json* value = member(body_, "n")) {
      const std::int64_t n = as_integer(*value, "n");
      if (n != 1) reject("n", fmt::format("n must be 1: one choice per request; got {}", n));
    }
  }

  void parse_stop() {
    const json* stop = member(body_, "stop");
    if (stop == nullptr) return;
    if (stop->is_string()) {
      if (stop->get_ref<const std::string&>().empty()) {
        reject("stop", "stop must not be an empty string");
      }
      request_.stop.push_back(stop->get<std::string>());
      return;
    }
    if (!stop->is_array()) wrong_type("stop", "a string or an array of strings", *stop);
    if (stop->size() > kMaxStopStrings) {
      reject("stop", fmt::format("stop may hold at most {} strings; got {}", kMaxStopStrings,
                                 stop->size()));
    }
    for (std::size_t i = 0; i < stop->size(); ++i) {
      const std::string param = fmt::format("stop[{}]", i);
      const std::string& text = as_string((*stop)[i], param);
      if (text.empty()) reject(param, fmt::format("{} must not be an empty string", param));
      request_.stop.push_back(text);
    }
  }

  void parse_stream() {
    if (const json* value = member(body_, "stream")) request_.stream = as_boolean(*value, "stream");
    if (const json* value = member(body_, "ignore_eos")) {
      request_.ignore_eos = as_boolean(*value, "ignore_eos");
    }
    const json* options = member(body_, "stream_options");
    if (options == nullptr) return;
    if (!request_.stream) {
      reject("stream_options", "stream_options is only allowed when stream is true");
    }
    if (!options->is_object()) wrong_type("stream_options", "an object", *options);
    for (const auto& [key, value] : options->items()) {
      if (key != "include_usage") unrecognized("stream_options." + key, "include_usage");
      if (!value.is_null()) request_.include_usage = as_boolean(value, "stream_options." + key);
    }
  }

  void parse_speculative() {
    const json* value = member(body_, "speculative");
    if (value == nullptr) return;
    SpeculationChoice& choice = request_.speculative;
    if (value->is_boolean()) {
      choice.enabled = value->get<bool>();
      return;
    }
    if (!value->is_object()) {
      wrong_type("speculative", "a boolean or an object {enabled, config, max_draft}", *value);
    }
    for (const auto& [key, field] : value->items()) {
      const std::string param = "speculative." + key;
      if (key != "enabled" && key != "config" && key != "max_draft") {
        unrecognized(param, "enabled, config, max_draft");
      }
      if (field.is_null()) continue;
      if (key == "enabled") {
        choice.enabled = as_boolean(field, param);
      } else if (key == "config") {
        choice.config = as_string(field, param);
      } else {
        const std::int64_t k = as_integer(field, param);
        if (k < 0 || k > kMaxDraftTokens) {
          reject(param, fmt::format("{} must be between 0 and {} (0: plain decoding); got {}",
                                    param, kMaxDraftTokens, k));
        }
        choice.max_draft = static_cast<int>(k);
      }
    }
  }

  // Parameters we accept only where they change nothing.
  void check_neutral_parameters() const {
    if (const json* value = member(body_, "user")) as_string(*value, "user");
    for (const char* param : {"frequency_penalty", "presence_penalty"}) {
      if (const json* value = member(body_, param)) {
        if (as_number(*value, param) != 0.0) unsupported(param, "0");
      }
    }
    if (const json* value = member(body_, "logprobs")) {
      if (value->is_boolean()) {
        if (value->get<bool>()) unsupported("logprobs", "false");
      } else if (value->is_number_integer()) {
        if (int64_of(*value) != 0) unsupported("logprobs", "false");
      } else {
        wrong_type("logprobs", "a boolean", *value);
      }
    }
    if (const json* value = member(body_, "top_logprobs")) {
      if (as_integer(*value, "top_logprobs") != 0) unsupported("top_logprobs", "null");
    }
    if (const json* value = member(body_, "echo")) {
      if (as_boolean(*value, "echo")) unsupported("echo", "false");
    }
    if (const json* value = member(body_, "best_of")) {
      if (as_integer(*value, "best_of") != 1) unsupported("best_of", "1");
    }
    if (const json* value = member(body_, "logit_bias")) {
      if (!value->is_object()) wrong_type("logit_bias", "an object", *value);
      if (!value->empty()) unsupported("logit_bias", "an empty object");
    }
    if (const json* value = member(body_, "suffix")) {
      if (!as_string(*value, "suffix").empty()) unsupported("suffix", "null");
    }
    if (const json* value = member(body_, "parallel_tool_calls")) {
      as_boolean(*value, "parallel_tool_calls");
    }
    if (const json* value = member(body_, "response_format")) check_response_format(*value);
    if (const json* value = member(body_, "tools")) {
      if (!value->is_array()) wrong_type("tools", "an array", *value);
      if (!value->empty()) unsupported("tools", "an empty array");
    }
    if (const json* value = member(body_, "tool_choice")) {
      if (!value->is_string() && !value->is_object()) {
        wrong_type("tool_choice", "a string or an object", *value);
      }
      // Without tools, "auto" chooses none too.
      if (!value->is_string() || (*value != "none" && *value != "auto")) {
        unsupported("tool_choice", "\"none\"");
      }
    }
    if (const json* value = member(body_, "metadata")) {
      if (!value->is_object()) wrong_type("metadata", "an object", *value);
    }
    if (const json* value = member(body_, "store")) {
      if (as_boolean(*value, "store")) unsupported("store", "false");
    }
    if (const json* value = member(body_, "service_tier")) as_string(*value, "service_tier");
  }

  static void check_response_format(const json& format) {
    if (!format.is_object()) wrong_type("response_format", "an object", format);
    const json* type = member(format, "type");
    if (type == nullptr) reject("response_format.type", "response_format.type is required");
    if (as_string(*type, "response_format.type") != "text" || format.size() != 1) {
      unsupported("response_format", "{\"type\": \"text\"}");
    }
  }

  const json& body_;
  CompletionRequest request_;
};

ApiError internal_error(std::string_view what) {
  ApiError error;
  error.message = fmt::format("invalid request: {}", what);
  return error;
}

}  // namespace

std::string_view endpoint_path(Endpoint endpoint) {
  return endpoint == Endpoint::kChatCompletions ? "/v1/chat/completions" : "/v1/completions";
}

ParsedRequest parse_completion_request(std::string_view body, Endpoint endpoint) {
  try {
    if (body.size() > kMaxRequestBodyBytes) {
      reject("",
             fmt::format("request body is {} bytes; the limit is {} bytes (4 MiB)", body.size(),
                         kMaxRequestBodyBytes),
             413);
    }
    json parsed;
    try {
      parsed = json::parse(body);
    } catch (const json::exception& e) {
      // A syntax error, or a number too large for a double (out_of_range.406). Drop the
      // library's "[json.exception.parse_error.101] " prefix.
      std::string_view reason = e.what();
      if (const auto end = reason.find("] "); reason.starts_with("[json.") && end != reason.npos) {
        reason.remove_prefix(end + 2);
      }
      reject("", fmt::format("malformed JSON: {}", reason));
    }
    if (!parsed.is_object()) {
      reject("", fmt::format("request body must be a JSON object (got {})", type_of(parsed)));
    }
    return RequestParser(parsed, endpoint).parse();
  } catch (Rejection& rejection) {
    return std::move(rejection.error);
  } catch (const std::exception& e) {
    return internal_error(e.what());
  } catch (...) {
    return internal_error("unexpected error");
  }
}

}  // namespace selfspec::serve
