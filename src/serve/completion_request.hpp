// CompletionRequest: one OpenAI request body (/v1/completions or /v1/chat/completions) parsed and
// validated. parse_completion_request() never throws: every problem, including an exception from
// the JSON library, comes back as an ApiError with the HTTP status, OpenAI's error type, the
// offending parameter's path ("messages[2].role", "stop[1]") and a message that says what is
// wrong and what is allowed. It checks the request on its own; whether the model named is served
// is the server's check. Parameters we do not implement are accepted only at their neutral value
// (logprobs false, tools empty, ...); anything else is refused rather than silently ignored.
#pragma once

#include "tokenizer/chat_template.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace selfspec::serve {

enum class Endpoint { kCompletions, kChatCompletions };

// "/v1/completions" or "/v1/chat/completions".
std::string_view endpoint_path(Endpoint endpoint);

// Request bodies larger than this are refused with 413 before parsing.
inline constexpr std::size_t kMaxRequestBodyBytes = std::size_t{4} << 20;  // 4 MiB
// The most stop strings a request may give (OpenAI's limit).
inline constexpr std::size_t kMaxStopStrings = 4;

struct ApiError {
  int status = 400;                            // HTTP status
  std::string message;                         // says what is wrong and what is allowed
  std::string type = "invalid_request_error";  // OpenAI error.type
  std::string param;  // offending parameter path ("" -> JSON null), e.g. "messages[2].role"
  std::string code;   // "" -> JSON null
};

struct SpeculationChoice {
  bool enabled = true;           // false: plain decoding for this request
  std::string config;            // a named speculative configuration ("" = the server's default)
  std::optional<int> max_draft;  // cap on draft tokens per round, 0..kMaxDraftTokens (0 = plain)
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  std::string prompt;                      // /v1/completions
  std::vector<ChatMessage> messages;       // /v1/chat/completions ("developer" -> "system")
  std::optional<std::int64_t> max_tokens;  // nullopt: until the context is full
  double temperature = 1.0;                // OpenAI's default
  double top_p = 1.0;
  std::int64_t top_k = 0;  // extension (vLLM/llama.cpp); 0 = off (-1 is given as 0)
  std::optional<std::uint64_t> seed;
  std::vector<std::string> stop;  // up to kMaxStopStrings non-empty strings
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // extension (vLLM, llama-server): generate max_tokens whatever comes
  SpeculationChoice speculative;
};

using ParsedRequest = std::variant<CompletionRequest, ApiError>;

// Parses and validates `body` as a request to `endpoint`. Never throws.
ParsedRequest parse_completion_request(std::string_view body, Endpoint endpoint);

}  // namespace selfspec::serve
