// The OpenAI-shaped response objects of openai_json.hpp, built with nlohmann::json. Strings are
// stored as given (nlohmann does not check UTF-8 until dump), so dump_json() replaces invalid
// bytes rather than throwing.
#include "serve/openai_json.hpp"

namespace selfspec::serve {
namespace {

using nlohmann::json;

json null_if_empty(const std::string& text) {
  return text.empty() ? json(nullptr) : json(text);
}

json response_head(std::string_view object, std::string_view id, std::string_view model,
                   std::int64_t created) {
  json head = json::object();
  head["id"] = id;
  head["object"] = object;
  head["created"] = created;
  head["model"] = model;
  return head;
}

}  // namespace

json error_json(const ApiError& error) {
  json body = json::object();
  body["message"] = error.message;
  body["type"] = error.type;
  body["param"] = null_if_empty(error.param);
  body["code"] = null_if_empty(error.code);
  return json{{"error", std::move(body)}};
}

std::string finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "stop";
}

std::string_view completion_object(Endpoint endpoint) {
  return endpoint == Endpoint::kChatCompletions ? "chat.completion" : "text_completion";
}

std::string_view chunk_object(Endpoint endpoint) {
  return endpoint == Endpoint::kChatCompletions ? "chat.completion.chunk" : "text_completion";
}

json usage_json(const Usage& usage) {
  json result = json::object();
  result["prompt_tokens"] = usage.prompt_tokens;
  result["completion_tokens"] = usage.completion_tokens;
  result["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  return result;
}

json speculation_json(const SpeculationCounts& counts, bool speculative_enabled) {
  json result = json::object();
  result["enabled"] = speculative_enabled;
  result["drafted"] = counts.drafted;
  result["accepted"] = counts.accepted;
  result["acceptance_rate"] = counts.drafted > 0 ? static_cast<double>(counts.accepted) /
                                                       static_cast<double>(counts.drafted)
                                                 : 0.0;
  result["verify_forwards"] = counts.rounds;
  return result;
}

json completion_json(Endpoint endpoint, std::string_view id, std::string_view model,
                     std::int64_t created, std::string_view text, FinishReason finish,
                     const Usage& usage, const SpeculationCounts& counts,
                     bool speculative_enabled) {
  json choice = json::object();
  choice["index"] = 0;
  if (endpoint == Endpoint::kChatCompletions) {
    choice["message"] = json{{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason_name(finish);
  json response = response_head(completion_object(endpoint), id, model, created);
  response["choices"] = json::array({std::move(choice)});
  response["usage"] = usage_json(usage);
  response["speculation"] = speculation_json(counts, speculative_enabled);
  return response;
}

json chunk_json(Endpoint endpoint, std::string_view id, std::string_view model,
                std::int64_t created, std::string_view delta_text,
                std::optional<FinishReason> finish, bool first_chat_chunk) {
  json choice = json::object();
  choice["index"] = 0;
  if (endpoint == Endpoint::kChatCompletions) {
    json delta = json::object();
    if (first_chat_chunk) {
      delta["role"] = "assistant";
      delta["content"] = delta_text;
    } else if (!delta_text.empty() || !finish.has_value()) {
      delta["content"] = delta_text;
    }
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = delta_text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish.has_value() ? json(finish_reason_name(*finish)) : json(nullptr);
  json chunk = response_head(chunk_object(endpoint), id, model, created);
  chunk["choices"] = json::array({std::move(choice)});
  return chunk;
}

json usage_chunk_json(Endpoint endpoint, std::string_view id, std::string_view model,
                      std::int64_t created, const Usage& usage, const SpeculationCounts& counts,
                      bool speculative_enabled) {
  json chunk = response_head(chunk_object(endpoint), id, model, created);
  chunk["choices"] = json::array();
  chunk["usage"] = usage_json(usage);
  chunk["speculation"] = speculation_json(counts, speculative_enabled);
  return chunk;
}

json models_json(std::span<const std::string> ids, std::int64_t created,
                 std::string_view owned_by) {
  json data = json::array();
  for (const std::string& id : ids) {
    json entry = json::object();
    entry["id"] = id;
    entry["object"] = "model";
    entry["created"] = created;
    entry["owned_by"] = owned_by;
    data.push_back(std::move(entry));
  }
  return json{{"object", "list"}, {"data", std::move(data)}};
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) {
  return "data: " + dump_json(j) + "\n\n";
}

}  // namespace selfspec::serve
