// The OpenAI-shaped response JSON: errors, whole completions and chat completions, streamed
// chunks (the chat deltas' role/content/empty shapes), the usage chunk, the model list, the SSE
// framing, and dumping text with invalid UTF-8 (a token cut inside a character) without throwing.
#include "serve/openai_json.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace selfspec::serve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr Endpoint kText = Endpoint::kCompletions;
constexpr Endpoint kChat = Endpoint::kChatCompletions;

TEST(OpenAiJson, ErrorWithoutParamOrCodeHasNulls) {
  ApiError error;
  error.message = "malformed JSON: x";
  EXPECT_EQ(error_json(error), json::parse(R"({"error": {"message": "malformed JSON: x",
      "type": "invalid_request_error", "param": null, "code": null}})"));
}

TEST(OpenAiJson, ErrorWithParamAndCode) {
  const ApiError error{404, "The model 'x' does not exist", "invalid_request_error", "model",
                       "model_not_found"};
  const json j = error_json(error);
  EXPECT_EQ(j.size(), 1U);
  EXPECT_EQ(j.at("error").size(), 4U);
  EXPECT_EQ(j.at("error").at("param"), "model");
  EXPECT_EQ(j.at("error").at("code"), "model_not_found");
  EXPECT_EQ(j.at("error").at("message"), "The model 'x' does not exist");
}

TEST(OpenAiJson, FinishReasonNames) {
  EXPECT_EQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_EQ(finish_reason_name(FinishReason::kLength), "length");
  EXPECT_EQ(finish_reason_name(FinishReason::kCancelled), "cancelled");
}

TEST(OpenAiJson, TextCompletionShape) {
  const json j =
      completion_json(kText, "cmpl-1", "smollm2", 1700000000, "Hello", FinishReason::kLength,
                      Usage{5, 7}, SpeculationCounts{8, 6, 3}, true);
  EXPECT_EQ(j, json::parse(R"({
    "id": "cmpl-1", "object": "text_completion", "created": 1700000000, "model": "smollm2",
    "choices": [{"index": 0, "text": "Hello", "logprobs": null, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    "speculation": {"enabled": true, "drafted": 8, "accepted": 6, "acceptance_rate": 0.75,
                    "verify_forwards": 3}})"));
  EXPECT_EQ(json::parse(dump_json(j)), j);
}

TEST(OpenAiJson, ChatCompletionShape) {
  const json j = completion_json(kChat, "chatcmpl-2", "qwen", 42, "4", FinishReason::kStop,
                                 Usage{10, 1}, SpeculationCounts{}, false);
  EXPECT_EQ(j, json::parse(R"({
    "id": "chatcmpl-2", "object": "chat.completion", "created": 42, "model": "qwen",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"},
                 "logprobs": null, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    "speculation": {"enabled": false, "drafted": 0, "accepted": 0, "acceptance_rate": 0.0,
                    "verify_forwards": 0}})"));
}

TEST(OpenAiJson, TextChunks) {
  EXPECT_EQ(chunk_json(kText, "cmpl-3", "m", 1, " world", std::nullopt, false),
            json::parse(R"({"id": "cmpl-3", "object": "text_completion", "created": 1,
      "model": "m", "choices": [{"index": 0, "text": " world", "logprobs": null,
      "finish_reason": null}]})"));
  const json last = chunk_json(kText, "cmpl-3", "m", 1, "", FinishReason::kStop, false);
  EXPECT_EQ(last.at("choices").at(0).at("text"), "");
  EXPECT_EQ(last.at("choices").at(0).at("finish_reason"), "stop");
}

TEST(OpenAiJson, ChatChunkDeltas) {
  const auto delta = [](std::string_view text, std::optional<FinishReason> finish, bool first) {
    const json chunk = chunk_json(kChat, "chatcmpl-4", "m", 9, text, finish, first);
    EXPECT_EQ(chunk.at("object"), "chat.completion.chunk");
    EXPECT_EQ(chunk.at("id"), "chatcmpl-4");
    EXPECT_EQ(chunk.at("created"), 9);
    EXPECT_EQ(chunk.at("model"), "m");
    EXPECT_EQ(chunk.at("choices").size(), 1U);
    const json& choice = chunk.at("choices").at(0);
    EXPECT_EQ(choice.at("index"), 0);
    EXPECT_TRUE(choice.at("logprobs").is_null());
    EXPECT_EQ(choice.size(), 4U);
    return std::make_pair(choice.at("delta"), choice.at("finish_reason"));
  };
  EXPECT_EQ(delta("", std::nullopt, true),
            std::make_pair(json{{"role", "assistant"}, {"content", ""}}, json(nullptr)));
  EXPECT_EQ(delta("Hi", std::nullopt, true),
            std::make_pair(json{{"role", "assistant"}, {"content", "Hi"}}, json(nullptr)));
  EXPECT_EQ(delta(" there", std::nullopt, false),
            std::make_pair(json{{"content", " there"}}, json(nullptr)));
  EXPECT_EQ(delta("", FinishReason::kLength, false),
            std::make_pair(json::object(), json("length")));
  // Text that arrives with the finish is not lost.
  EXPECT_EQ(delta("!", FinishReason::kStop, false),
            std::make_pair(json{{"content", "!"}}, json("stop")));
}

TEST(OpenAiJson, UsageChunk) {
  const json j =
      usage_chunk_json(kChat, "chatcmpl-5", "m", 3, Usage{4, 2}, SpeculationCounts{0, 0, 2}, true);
  EXPECT_EQ(j, json::parse(R"({"id": "chatcmpl-5", "object": "chat.completion.chunk",
      "created": 3, "model": "m", "choices": [],
      "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
      "speculation": {"enabled": true, "drafted": 0, "accepted": 0, "acceptance_rate": 0.0,
                      "verify_forwards": 2}})"));
  EXPECT_EQ(usage_chunk_json(kText, "c", "m", 3, {}, {}, false).at("object"), "text_completion");
}

TEST(OpenAiJson, ModelList) {
  const std::vector<std::string> ids = {"smollm2", "qwen"};
  EXPECT_EQ(models_json(ids, 100, "selfspec"), json::parse(R"({"object": "list", "data": [
      {"id": "smollm2", "object": "model", "created": 100, "owned_by": "selfspec"},
      {"id": "qwen", "object": "model", "created": 100, "owned_by": "selfspec"}]})"));
  EXPECT_EQ(models_json({}, 0, "x"), json::parse(R"({"object": "list", "data": []})"));
}

TEST(OpenAiJson, SseFraming) {
  const json chunk = chunk_json(kText, "c", "m", 1, "line one\nline two", std::nullopt, false);
  const std::string event = sse_event(chunk);
  ASSERT_TRUE(event.starts_with("data: "));
  ASSERT_TRUE(event.ends_with("\n\n"));
  const std::string payload = event.substr(6, event.size() - 8);
  EXPECT_EQ(payload.find('\n'), std::string::npos) << "one data line per event";
  EXPECT_EQ(json::parse(payload), chunk);
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(OpenAiJson, InvalidUtf8IsReplacedNotThrown) {
  const std::string text = "ok \xe2\x82 cut \xff end";  // a cut euro sign and a stray byte
  const json whole = completion_json(kChat, "c", "m", 1, text, FinishReason::kStop, {}, {}, true);
  EXPECT_THROW(static_cast<void>(whole.dump()), json::type_error) << "why dump_json exists";
  std::string dumped;
  ASSERT_NO_THROW(dumped = dump_json(whole));
  const json back = json::parse(dumped);
  EXPECT_EQ(back.at("choices").at(0).at("message").at("content"),
            "ok \xef\xbf\xbd cut \xef\xbf\xbd end");
  std::string event;
  ASSERT_NO_THROW(event = sse_event(chunk_json(kText, "c", "m", 1, text, std::nullopt, false)));
  EXPECT_THAT(event, HasSubstr("\xef\xbf\xbd end"));
  ApiError error;
  error.message = "bad \xc3";
  EXPECT_NO_THROW(static_cast<void>(dump_json(error_json(error))));
}

TEST(OpenAiJson, NonAsciiTextStaysUtf8) {
  const std::string text = "caf\xc3\xa9 \xe2\x82\xac";
  const std::string event = sse_event(chunk_json(kText, "c", "m", 1, text, std::nullopt, false));
  EXPECT_THAT(event, HasSubstr(text));
}

}  // namespace
}  // namespace selfspec::serve
