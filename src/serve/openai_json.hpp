// The OpenAI-shaped responses of `selfspec serve`: errors, whole completions and chat
// completions, streamed chunks and their Server-Sent-Events framing, the usage chunk of
// stream_options.include_usage, and the model list. Each response also carries our extension
// "speculation": {enabled, drafted, accepted, acceptance_rate, verify_forwards}.
// Generated text may hold invalid UTF-8 (a token can end inside a character), and nlohmann's
// dump() throws on it by default: dump these objects only with dump_json() (or sse_event()),
// which replace invalid bytes with U+FFFD.
#pragma once

#include "serve/completion_request.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace selfspec::serve {

enum class FinishReason {
  kStop,      // "stop": a stop string or the end-of-sequence token
  kLength,    // "length": max_tokens or the context is full
  kCancelled  // "cancelled": the client went away (normally never sent)
};

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
};

// Speculative decoding's counts for one request (the "speculation" extension field).
struct SpeculationCounts {
  std::int64_t drafted = 0;   // tokens drafted
  std::int64_t accepted = 0;  // drafted tokens the target accepted
  std::int64_t rounds = 0;    // verification forwards ("verify_forwards")
};

// The SSE stream's last event.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// {"error": {"message", "type", "param" (null when empty), "code" (null when empty)}}.
nlohmann::json error_json(const ApiError& error);

// "stop", "length" or "cancelled".
std::string finish_reason_name(FinishReason reason);

// "text_completion" or "chat.completion".
std::string_view completion_object(Endpoint endpoint);
// "text_completion" or "chat.completion.chunk".
std::string_view chunk_object(Endpoint endpoint);

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
nlohmann::json usage_json(const Usage& usage);
// {"enabled", "drafted", "accepted", "acceptance_rate" (accepted / drafted, 0 without drafts),
//  "verify_forwards"}.
nlohmann::json speculation_json(const SpeculationCounts& counts, bool speculative_enabled);

// A whole response: {"id", "object", "created", "model", "choices": [one choice], "usage",
// "speculation"}. The choice is {"index": 0, "text", "logprobs": null, "finish_reason"} for
// /v1/completions, {"index": 0, "message": {"role": "assistant", "content"}, "logprobs": null,
// "finish_reason"} for /v1/chat/completions.
nlohmann::json completion_json(Endpoint endpoint, std::string_view id, std::string_view model,
                               std::int64_t created, std::string_view text, FinishReason finish,
                               const Usage& usage, const SpeculationCounts& counts,
                               bool speculative_enabled);

// One streamed chunk: {"id", "object", "created", "model", "choices": [one choice]}, the choice's
// finish_reason null until `finish` is given. /v1/completions: {"index": 0, "text", "logprobs":
// null, "finish_reason"}. Chat: {"index": 0, "delta", "logprobs": null, "finish_reason"}, the delta
// {"role": "assistant", "content"} in the first chunk, {"content"} in later ones, and {} in a
// final chunk (finish given) without text.
nlohmann::json chunk_json(Endpoint endpoint, std::string_view id, std::string_view model,
                          std::int64_t created, std::string_view delta_text,
                          std::optional<FinishReason> finish, bool first_chat_chunk);

// The usage chunk sent before [DONE] with stream_options.include_usage: "choices": [], "usage"
// and "speculation".
nlohmann::json usage_chunk_json(Endpoint endpoint, std::string_view id, std::string_view model,
                                std::int64_t created, const Usage& usage,
                                const SpeculationCounts& counts, bool speculative_enabled);

// {"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}, ...]}.
nlohmann::json models_json(std::span<const std::string> ids, std::int64_t created,
                           std::string_view owned_by);

// j.dump() that never throws on invalid UTF-8 in strings (each bad byte becomes U+FFFD).
std::string dump_json(const nlohmann::json& j);

// "data: " + dump_json(j) + "\n\n".
std::string sse_event(const nlohmann::json& j);

}  // namespace selfspec::serve
