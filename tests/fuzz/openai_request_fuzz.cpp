// Fuzz target: `selfspec serve`'s OpenAI request parser (parse_completion_request) and response
// JSON. The input is an HTTP request body, parsed for both /v1/completions and
// /v1/chat/completions. The parser must never throw; a refusal must be a 400 or 413 with a
// message, and an accepted request must hold what validation promises. Every response object
// built from it (with the request's text, and with the raw input as generated text, invalid UTF-8
// included) must dump to JSON that parses back.
#include "control/draft_length_controller.hpp"
#include "serve/completion_request.hpp"
#include "serve/openai_json.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace {

using selfspec::fuzz::require;
using namespace selfspec::serve;

// Dumps `j` (which may hold invalid UTF-8) and requires the text to be JSON again.
void require_dumpable(const nlohmann::json& j) {
  const std::string text = dump_json(j);
  require(nlohmann::json::accept(text), "dump_json output is not valid JSON");
  const std::string event = sse_event(j);
  require(event.size() == text.size() + 8 && event.ends_with("\n\n"), "sse_event framing");
}

void check_request(const CompletionRequest& r, Endpoint endpoint) {
  require(r.endpoint == endpoint, "endpoint kept");
  require(!r.model.empty(), "model non-empty");
  if (endpoint == Endpoint::kCompletions) {
    require(!r.prompt.empty() && r.messages.empty(), "completions: a prompt, no messages");
  } else {
    require(r.prompt.empty() && !r.messages.empty(), "chat: messages, no prompt");
    for (const selfspec::ChatMessage& m : r.messages) {
      require(m.role == "system" || m.role == "user" || m.role == "assistant", "role");
    }
  }
  require(!r.max_tokens.has_value() || *r.max_tokens >= 1, "max_tokens >= 1");
  require(r.temperature >= 0.0 && r.temperature <= 2.0, "temperature in [0, 2]");
  require(r.top_p > 0.0 && r.top_p <= 1.0, "top_p in (0, 1]");
  require(r.top_k >= 0, "top_k >= 0");
  require(r.stop.size() <= kMaxStopStrings, "at most 4 stop strings");
  for (const std::string& stop : r.stop) require(!stop.empty(), "stop strings non-empty");
  require(r.stream || !r.include_usage, "include_usage only when streaming");
  require(
      !r.speculative.max_draft.has_value() ||
          (*r.speculative.max_draft >= 0 && *r.speculative.max_draft <= selfspec::kMaxDraftTokens),
      "max_draft in [0, kMaxDraftTokens]");
}

void respond(const CompletionRequest& r, std::string_view text) {
  const Endpoint e = r.endpoint;
  const Usage usage{static_cast<std::int64_t>(text.size()), 3};
  const SpeculationCounts counts{5, 2, 1};
  require_dumpable(completion_json(e, "id-1", r.model, 1, text, FinishReason::kStop, usage, counts,
                                   r.speculative.enabled));
  require_dumpable(chunk_json(e, "id-1", r.model, 1, text, std::nullopt, true));
  require_dumpable(chunk_json(e, "id-1", r.model, 1, text, std::nullopt, false));
  require_dumpable(chunk_json(e, "id-1", r.model, 1, "", FinishReason::kLength, false));
  require_dumpable(usage_chunk_json(e, "id-1", r.model, 1, usage, counts, r.speculative.enabled));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body = selfspec::fuzz::as_text(data, size);
  for (const Endpoint endpoint : {Endpoint::kCompletions, Endpoint::kChatCompletions}) {
    const ParsedRequest parsed = parse_completion_request(body, endpoint);
    if (const auto* error = std::get_if<ApiError>(&parsed)) {
      require(error->status == 400 || error->status == 413, "error status 400 or 413");
      require(!error->message.empty(), "error message non-empty");
      require_dumpable(error_json(*error));
      continue;
    }
    const CompletionRequest& request = std::get<CompletionRequest>(parsed);
    check_request(request, endpoint);
    respond(request, endpoint == Endpoint::kCompletions ? std::string_view(request.prompt)
                                                        : request.messages.back().content);
    respond(request, body);  // raw bytes as generated text: invalid UTF-8 must not throw
  }
  return 0;
}
