// parse_completion_request(): every kind of bad request comes back as an ApiError with its HTTP
// status, the offending parameter and a message saying what is wrong (one table, one test per
// row), good requests of both endpoints with every field are parsed into CompletionRequest, and
// no input makes the parser throw.
#include "serve/completion_request.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

namespace selfspec::serve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr Endpoint kText = Endpoint::kCompletions;
constexpr Endpoint kChat = Endpoint::kChatCompletions;

// A valid request to `endpoint` with `changes` merged in (a null value removes the key).
std::string body_with(Endpoint endpoint, const json& changes) {
  json body = endpoint == kText
                  ? json{{"model", "m"}, {"prompt", "Hello"}}
                  : json{{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  body.merge_patch(changes);
  return body.dump();
}

std::string messages_with(const json& messages) {
  return json{{"model", "m"}, {"messages", messages}}.dump();
}

CompletionRequest parse_ok(std::string_view body, Endpoint endpoint) {
  ParsedRequest parsed = parse_completion_request(body, endpoint);
  if (const auto* error = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << "refused (" << error->param << "): " << error->message;
    return {};
  }
  return std::get<CompletionRequest>(std::move(parsed));
}

struct BadCase {
  std::string name;
  Endpoint endpoint;
  std::string body;
  std::string param;
  std::string fragment;
  int status = 400;
};

// Bad requests: the body and the model.
std::vector<BadCase> body_and_model_cases() {
  return {
      {"MalformedJson", kText, R"({"model": "m", )", "", "malformed JSON: "},
      {"EmptyBody", kChat, "", "", "malformed JSON"},
      {"TrailingGarbage", kText, R"({"model": "m", "prompt": "a"} x)", "", "malformed JSON"},
      {"InvalidUtf8", kText, "{\"model\": \"m\", \"prompt\": \"\xff\"}", "", "malformed JSON"},
      {"NumberOverflow", kText, R"({"model": "m", "prompt": "a", "max_tokens": 1e400})", "",
       "malformed JSON: number overflow parsing '1e400'"},
      {"NotAnObject", kText, "[1, 2]", "", "request body must be a JSON object (got array)"},
      {"StringBody", kChat, R"("hello")", "", "must be a JSON object"},
      {"MissingModel", kText, R"({"prompt": "a"})", "model", "you must provide a model"},
      {"NullModel", kChat, body_with(kChat, {{"model", nullptr}}), "model", "provide a model"},
      {"ModelNotString", kText, body_with(kText, {{"model", 7}}), "model",
       "model must be a string (got integer)"},
      {"EmptyModel", kText, body_with(kText, {{"model", ""}}), "model", "non-empty"},
  };
}

// Bad requests: the prompt, and each endpoint's own input.
std::vector<BadCase> prompt_cases() {
  return {
      {"MissingPrompt", kText, R"({"model": "m"})", "prompt", "you must provide a prompt"},
      {"EmptyPrompt", kText, body_with(kText, {{"prompt", ""}}), "prompt",
       "prompt must not be empty"},
      {"EmptyPromptInArray", kText, body_with(kText, {{"prompt", {""}}}), "prompt",
       "must not be empty"},
      {"PromptTokenIds", kText, body_with(kText, {{"prompt", {1, 2, 3}}}), "prompt",
       "only one text prompt per request"},
      {"TwoPrompts", kText, body_with(kText, {{"prompt", {"a", "b"}}}), "prompt",
       "only one text prompt per request"},
      {"NoPrompts", kText, body_with(kText, {{"prompt", json::array()}}), "prompt",
       "only one text prompt per request"},
      {"PromptNumber", kText, body_with(kText, {{"prompt", 5}}), "prompt",
       "prompt must be a string or an array of one string"},
      {"MessagesOnCompletions", kText,
       body_with(kText, {{"messages", {{{"role", "user"}, {"content", "x"}}}}}), "messages",
       "/v1/chat/completions"},
      {"PromptOnChat", kChat, body_with(kChat, {{"prompt", "x"}}), "prompt", "/v1/completions"},
  };
}

// Bad requests: chat messages and their content parts.
std::vector<BadCase> message_cases() {
  return {
      {"MissingMessages", kChat, R"({"model": "m"})", "messages", "provide a messages"},
      {"EmptyMessages", kChat, messages_with(json::array()), "messages",
       "messages must be a non-empty array"},
      {"MessagesNotArray", kChat, messages_with({{"role", "user"}, {"content", "x"}}), "messages",
       "messages must be an array"},
      {"MessageNotObject", kChat, messages_with({"hi"}), "messages[0]",
       "messages[0] must be an object (got string)"},
      {"ToolRole", kChat,
       messages_with({{{"role", "user"}, {"content", "x"}}, {{"role", "tool"}, {"content", "4"}}}),
       "messages[1].role", "'tool' is not supported: roles are system, user and assistant"},
      {"FunctionRole", kChat, messages_with({{{"role", "function"}, {"content", "4"}}}),
       "messages[0].role", "does not support tool calls"},
      {"UnknownRole", kChat, messages_with({{{"role", "robot"}, {"content", "x"}}}),
       "messages[0].role", "'robot'"},
      {"MissingRole", kChat, messages_with({{{"content", "x"}}}), "messages[0].role",
       "messages[0].role is required"},
      {"RoleNotString", kChat, messages_with({{{"role", 1}, {"content", "x"}}}), "messages[0].role",
       "messages[0].role must be a string"},
      {"MissingContent", kChat, messages_with({{{"role", "user"}}}), "messages[0].content",
       "messages[0].content is required"},
      {"NullContent", kChat, messages_with({{{"role", "assistant"}, {"content", nullptr}}}),
       "messages[0].content", "is required"},
      {"ContentNumber", kChat, messages_with({{{"role", "user"}, {"content", 3}}}),
       "messages[0].content", "must be a string or an array of text parts"},
      {"ImageContentPart", kChat,
       messages_with({{{"role", "user"},
                       {"content",
                        {{{"type", "text"}, {"text", "What is this?"}},
                         {{"type", "image_url"}, {"image_url", {{"url", "http://x/y.png"}}}}}}}}),
       "messages[0].content[1].type", "'image_url': content parts of this type are not supported"},
      {"AudioContentPart", kChat,
       messages_with({{{"role", "user"}, {"content", {{{"type", "input_audio"}}}}}}),
       "messages[0].content[0].type", "not supported"},
      {"TextPartWithoutText", kChat,
       messages_with({{{"role", "user"}, {"content", {{{"type", "text"}}}}}}),
       "messages[0].content[0].text", "is required"},
      {"TextPartTextNumber", kChat,
       messages_with({{{"role", "user"}, {"content", {{{"type", "text"}, {"text", 1}}}}}}),
       "messages[0].content[0].text", "must be a string"},
      {"ContentPartNotObject", kChat, messages_with({{{"role", "user"}, {"content", {"plain"}}}}),
       "messages[0].content[0]", "must be an object"},
      {"MessageUnknownKey", kChat,
       messages_with({{{"role", "user"}, {"content", "x"}, {"mood", "happy"}}}), "messages[0].mood",
       "Unrecognized request argument supplied: messages[0].mood"},
      {"MessageToolCalls", kChat,
       messages_with({{{"role", "assistant"}, {"content", "x"}, {"tool_calls", {{{"id", "1"}}}}}}),
       "messages[0].tool_calls", "no tool calls"},
      {"MessageNameNotString", kChat,
       messages_with({{{"role", "user"}, {"content", "x"}, {"name", 5}}}), "messages[0].name",
       "must be a string"},
  };
}

// Bad requests: the token budget and sampling.
std::vector<BadCase> sampling_cases() {
  return {
      {"MaxTokensZero", kText, body_with(kText, {{"max_tokens", 0}}), "max_tokens",
       "max_tokens must be at least 1"},
      {"MaxTokensNegative", kChat, body_with(kChat, {{"max_tokens", -1}}), "max_tokens", "got -1"},
      {"MaxTokensString", kText, body_with(kText, {{"max_tokens", "10"}}), "max_tokens",
       "max_tokens must be an integer (got string)"},
      {"MaxTokensFloat", kText, body_with(kText, {{"max_tokens", 1.5}}), "max_tokens",
       "max_tokens must be an integer (got number)"},
      {"MaxCompletionTokensZero", kChat, body_with(kChat, {{"max_completion_tokens", 0}}),
       "max_completion_tokens", "at least 1"},
      {"MaxTokenAliasesDiffer", kChat,
       body_with(kChat, {{"max_tokens", 10}, {"max_completion_tokens", 20}}),
       "max_completion_tokens", "max_tokens (10) and max_completion_tokens (20) differ"},
      {"TemperatureThree", kText, body_with(kText, {{"temperature", 3}}), "temperature",
       "temperature must be between 0 and 2; got 3"},
      {"TemperatureNegative", kChat, body_with(kChat, {{"temperature", -0.5}}), "temperature",
       "between 0 and 2"},
      {"TemperatureString", kText, body_with(kText, {{"temperature", "hot"}}), "temperature",
       "temperature must be a number (got string)"},
      {"TopPZero", kText, body_with(kText, {{"top_p", 0}}), "top_p",
       "top_p must be greater than 0 and at most 1"},
      {"TopPAboveOne", kChat, body_with(kChat, {{"top_p", 1.5}}), "top_p", "got 1.5"},
      {"TopPBoolean", kText, body_with(kText, {{"top_p", true}}), "top_p",
       "top_p must be a number (got boolean)"},
      {"TopKBelowMinusOne", kText, body_with(kText, {{"top_k", -2}}), "top_k",
       "top_k must be at least 1, or 0 or -1 for off"},
      {"TopKFloat", kText, body_with(kText, {{"top_k", 2.5}}), "top_k", "top_k must be an integer"},
      {"SeedString", kChat, body_with(kChat, {{"seed", "42"}}), "seed",
       "seed must be an integer (got string)"},
      {"SeedFloat", kText, body_with(kText, {{"seed", 4.2}}), "seed", "seed must be an integer"},
      {"NTwo", kText, body_with(kText, {{"n", 2}}), "n", "n must be 1: one choice per request"},
      {"NString", kChat, body_with(kChat, {{"n", "1"}}), "n", "n must be an integer"},
  };
}

// Bad requests: stop strings and streaming.
std::vector<BadCase> stop_and_stream_cases() {
  return {
      {"FiveStops", kText, body_with(kText, {{"stop", {"a", "b", "c", "d", "e"}}}), "stop",
       "stop may hold at most 4 strings; got 5"},
      {"EmptyStopString", kText, body_with(kText, {{"stop", ""}}), "stop",
       "stop must not be an empty string"},
      {"EmptyStopInArray", kChat, body_with(kChat, {{"stop", {"a", ""}}}), "stop[1]",
       "stop[1] must not be an empty string"},
      {"StopEntryNumber", kText, body_with(kText, {{"stop", {"a", 3}}}), "stop[1]",
       "stop[1] must be a string (got integer)"},
      {"StopNumber", kText, body_with(kText, {{"stop", 7}}), "stop",
       "stop must be a string or an array of strings"},
      {"StreamString", kText, body_with(kText, {{"stream", "yes"}}), "stream",
       "stream must be a boolean (got string)"},
      {"StreamOptionsWithoutStream", kChat,
       body_with(kChat, {{"stream_options", {{"include_usage", true}}}}), "stream_options",
       "stream_options is only allowed when stream is true"},
      {"StreamOptionsStreamFalse", kText,
       body_with(kText, {{"stream", false}, {"stream_options", {{"include_usage", true}}}}),
       "stream_options", "only allowed when stream is true"},
      {"StreamOptionsNotObject", kText, body_with(kText, {{"stream", true}, {"stream_options", 1}}),
       "stream_options", "stream_options must be an object"},
      {"IncludeUsageString", kChat,
       body_with(kChat, {{"stream", true}, {"stream_options", {{"include_usage", "yes"}}}}),
       "stream_options.include_usage", "stream_options.include_usage must be a boolean"},
      {"StreamOptionsUnknownKey", kChat,
       body_with(kChat, {{"stream", true}, {"stream_options", {{"chunk_size", 4}}}}),
       "stream_options.chunk_size", "Unrecognized request argument supplied"},
  };
}

// Bad requests: the speculative extension.
std::vector<BadCase> speculative_cases() {
  return {
      {"SpeculativeString", kText, body_with(kText, {{"speculative", "fast"}}), "speculative",
       "speculative must be a boolean or an object"},
      {"SpeculativeMaxDraft64", kText, body_with(kText, {{"speculative", {{"max_draft", 64}}}}),
       "speculative.max_draft",
       "speculative.max_draft must be between 0 and 63 (0: plain decoding); got 64"},
      {"SpeculativeMaxDraftNegative", kChat,
       body_with(kChat, {{"speculative", {{"max_draft", -1}}}}), "speculative.max_draft",
       "between 0 and 63"},
      {"SpeculativeMaxDraftFloat", kChat, body_with(kChat, {{"speculative", {{"max_draft", 2.5}}}}),
       "speculative.max_draft", "must be an integer"},
      {"SpeculativeUnknownKey", kText, body_with(kText, {{"speculative", {{"mode", "eagle"}}}}),
       "speculative.mode", "allowed: enabled, config, max_draft"},
      {"SpeculativeEnabledString", kText, body_with(kText, {{"speculative", {{"enabled", "yes"}}}}),
       "speculative.enabled", "speculative.enabled must be a boolean"},
      {"SpeculativeConfigNumber", kChat, body_with(kChat, {{"speculative", {{"config", 5}}}}),
       "speculative.config", "speculative.config must be a string"},
  };
}

// Bad requests: unknown keys, parameters this server does not implement, the body-size limit.
std::vector<BadCase> unsupported_cases() {
  const std::string big_prompt(kMaxRequestBodyBytes, 'x');
  return {
      {"UnknownKey", kText, body_with(kText, {{"min_p", 0.1}}), "min_p",
       "Unrecognized request argument supplied: min_p"},
      {"LogprobsTrue", kChat, body_with(kChat, {{"logprobs", true}}), "logprobs",
       "logprobs is not supported by this server"},
      {"LogprobsFive", kText, body_with(kText, {{"logprobs", 5}}), "logprobs", "not supported"},
      {"LogprobsString", kText, body_with(kText, {{"logprobs", "no"}}), "logprobs",
       "logprobs must be a boolean"},
      {"TopLogprobs", kChat, body_with(kChat, {{"top_logprobs", 3}}), "top_logprobs",
       "top_logprobs is not supported"},
      {"Tools", kChat,
       body_with(kChat, {{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}}),
       "tools", "tools is not supported by this server"},
      {"ToolsNotArray", kChat, body_with(kChat, {{"tools", "f"}}), "tools",
       "tools must be an array"},
      {"ToolChoiceRequired", kChat, body_with(kChat, {{"tool_choice", "required"}}), "tool_choice",
       "tool_choice is not supported"},
      {"FrequencyPenalty", kText, body_with(kText, {{"frequency_penalty", 0.5}}),
       "frequency_penalty", "frequency_penalty is not supported by this server (only 0"},
      {"PresencePenaltyString", kChat, body_with(kChat, {{"presence_penalty", "x"}}),
       "presence_penalty", "presence_penalty must be a number"},
      {"EchoTrue", kText, body_with(kText, {{"echo", true}}), "echo", "echo is not supported"},
      {"BestOfTwo", kText, body_with(kText, {{"best_of", 2}}), "best_of",
       "best_of is not supported"},
      {"LogitBias", kText, body_with(kText, {{"logit_bias", {{"50256", -100}}}}), "logit_bias",
       "logit_bias is not supported"},
      {"Suffix", kText, body_with(kText, {{"suffix", "end"}}), "suffix", "suffix is not supported"},
      {"ResponseFormatJson", kChat,
       body_with(kChat, {{"response_format", {{"type", "json_object"}}}}), "response_format",
       "response_format is not supported"},
      {"ParallelToolCallsString", kChat, body_with(kChat, {{"parallel_tool_calls", "yes"}}),
       "parallel_tool_calls", "must be a boolean"},
      {"UserNumber", kText, body_with(kText, {{"user", 5}}), "user", "user must be a string"},
      {"BodyOverLimit", kText, body_with(kText, {{"prompt", big_prompt}}), "",
       "the limit is 4194304 bytes (4 MiB)", 413},
  };
}

std::vector<BadCase> bad_cases() {
  std::vector<BadCase> cases;
  for (auto group : {body_and_model_cases, prompt_cases, message_cases, sampling_cases,
                     stop_and_stream_cases, speculative_cases, unsupported_cases}) {
    std::vector<BadCase> more = group();
    cases.insert(cases.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
  }
  return cases;
}

// Failures name the case, not its bytes.
void PrintTo(const BadCase& bad, std::ostream* out) {
  *out << bad.name;
}

class CompletionRequestBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(CompletionRequestBadTest, IsRefusedWithStatusParamAndMessage) {
  const BadCase& bad = GetParam();
  const ParsedRequest parsed = parse_completion_request(bad.body, bad.endpoint);
  ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << "accepted: " << bad.body.substr(0, 300);
  const ApiError& error = std::get<ApiError>(parsed);
  EXPECT_EQ(error.status, bad.status);
  EXPECT_EQ(error.type, "invalid_request_error");
  EXPECT_EQ(error.param, bad.param) << error.message;
  EXPECT_THAT(error.message, HasSubstr(bad.fragment));
  EXPECT_THAT(error.message, Not(HasSubstr("[json.exception")));
  EXPECT_EQ(error.code, "");
}

INSTANTIATE_TEST_SUITE_P(CompletionRequestBad, CompletionRequestBadTest,
                         ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& case_info) {
                           return case_info.param.name;
                         });

TEST(CompletionRequest, CompletionsWithEveryField) {
  const json body = {
      {"model", "smollm2"},
      {"prompt", {"Once upon a time"}},
      {"max_tokens", 32},
      {"temperature", 0.7},
      {"top_p", 0.9},
      {"top_k", -1},
      {"seed", -1},
      {"n", 1},
      {"stop", {"\n", "END"}},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
      {"speculative", {{"enabled", true}, {"config", "fast"}, {"max_draft", 8}}},
      {"user", "alice"},
      {"frequency_penalty", 0},
      {"presence_penalty", 0.0},
      {"logprobs", nullptr},
      {"top_logprobs", nullptr},
      {"echo", false},
      {"best_of", 1},
      {"logit_bias", json::object()},
      {"suffix", nullptr},
  };
  const CompletionRequest r = parse_ok(body.dump(), kText);
  EXPECT_EQ(r.endpoint, kText);
  EXPECT_EQ(r.model, "smollm2");
  EXPECT_EQ(r.prompt, "Once upon a time");
  EXPECT_TRUE(r.messages.empty());
  EXPECT_EQ(r.max_tokens, 32);
  EXPECT_DOUBLE_EQ(r.temperature, 0.7);
  EXPECT_DOUBLE_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_EQ(r.seed, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.speculative.enabled);
  EXPECT_EQ(r.speculative.config, "fast");
  EXPECT_EQ(r.speculative.max_draft, 8);
}

TEST(CompletionRequest, ChatWithEveryField) {
  const json body = {
      {"model", "qwen"},
      {"messages",
       {{{"role", "developer"}, {"content", "Be brief."}},
        {{"role", "user"},
         {"name", "bob"},
         {"content",
          {{{"type", "text"}, {"text", "What is "}}, {{"type", "text"}, {"text", "2+2?"}}}}},
        {{"role", "assistant"}, {"content", "4"}, {"tool_calls", json::array()}},
        {{"role", "system"}, {"content", ""}},
        {{"role", "user"}, {"content", "Thanks"}}}},
      {"max_completion_tokens", 100},
      {"max_tokens", 100},
      {"temperature", 0},
      {"top_p", 1},
      {"top_k", 40},
      {"seed", 18446744073709551615ULL},
      {"stop", "###"},
      {"stream", false},
      {"speculative", false},
      {"parallel_tool_calls", true},
      {"response_format", {{"type", "text"}}},
      {"tools", json::array()},
      {"tool_choice", "none"},
      {"logprobs", false},
  };
  const CompletionRequest r = parse_ok(body.dump(), kChat);
  EXPECT_EQ(r.endpoint, kChat);
  EXPECT_EQ(r.model, "qwen");
  EXPECT_TRUE(r.prompt.empty());
  ASSERT_EQ(r.messages.size(), 5U);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "What is 2+2?");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[2].content, "4");
  EXPECT_EQ(r.messages[3].content, "");
  EXPECT_EQ(r.messages[4].content, "Thanks");
  EXPECT_EQ(r.max_tokens, 100);
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.top_p, 1.0);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.seed, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(r.stop, std::vector<std::string>{"###"});
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.speculative.enabled);
  EXPECT_EQ(r.speculative.max_draft, std::nullopt);
}

TEST(CompletionRequest, MinimalRequestGetsOpenAiDefaults) {
  const CompletionRequest r = parse_ok(R"({"model": "m", "prompt": "Hi"})", kText);
  EXPECT_EQ(r.max_tokens, std::nullopt);
  EXPECT_EQ(r.temperature, 1.0);
  EXPECT_EQ(r.top_p, 1.0);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_EQ(r.seed, std::nullopt);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_TRUE(r.speculative.enabled);
  EXPECT_TRUE(r.speculative.config.empty());
  EXPECT_EQ(r.speculative.max_draft, std::nullopt);
}

TEST(CompletionRequest, NullMeansAbsent) {
  const json body = {{"model", "m"},
                     {"prompt", "Hi"},
                     {"max_tokens", nullptr},
                     {"temperature", nullptr},
                     {"top_p", nullptr},
                     {"top_k", nullptr},
                     {"seed", nullptr},
                     {"n", nullptr},
                     {"stop", nullptr},
                     {"stream", nullptr},
                     {"stream_options", nullptr},
                     {"speculative", nullptr},
                     {"user", nullptr},
                     {"tools", nullptr},
                     {"tool_choice", nullptr},
                     {"logit_bias", nullptr}};
  const CompletionRequest r = parse_ok(body.dump(), kText);
  EXPECT_EQ(r.max_tokens, std::nullopt);
  EXPECT_EQ(r.temperature, 1.0);
  EXPECT_EQ(r.seed, std::nullopt);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.speculative.enabled);
}

TEST(CompletionRequest, EdgeValuesAreAccepted) {
  CompletionRequest r =
      parse_ok(body_with(kText, {{"max_tokens", 18446744073709551615ULL},
                                 {"temperature", 2},
                                 {"top_p", 1e-9},
                                 {"stop", {"a", "b", "c", "d"}},
                                 {"speculative", {{"max_draft", 63}, {"enabled", nullptr}}}}),
               kText);
  EXPECT_EQ(r.max_tokens, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(r.stop.size(), 4U);
  EXPECT_EQ(r.speculative.max_draft, 63);
  r = parse_ok(body_with(kChat, {{"speculative", {{"max_draft", 0}}},
                                 {"stop", json::array()},
                                 {"tool_choice", "auto"},
                                 {"stream", true},
                                 {"stream_options", {{"include_usage", false}}}}),
               kChat);
  EXPECT_EQ(r.speculative.max_draft, 0);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.include_usage);
  r = parse_ok(body_with(kChat, {{"seed", 42}, {"max_tokens", 1}, {"max_completion_tokens", 1}}),
               kChat);
  EXPECT_EQ(r.seed, 42U);
  EXPECT_EQ(r.max_tokens, 1);
}

TEST(CompletionRequest, BodyAtTheLimitIsParsed) {
  const std::string head = R"({"model": "m", "prompt": ")";
  const std::string tail = R"("})";
  const std::string body =
      head + std::string(kMaxRequestBodyBytes - head.size() - tail.size(), 'x') + tail;
  ASSERT_EQ(body.size(), kMaxRequestBodyBytes);
  EXPECT_EQ(parse_ok(body, kText).prompt.size(), kMaxRequestBodyBytes - head.size() - tail.size());
}

TEST(CompletionRequest, UnknownKeysAreNamedWhateverElseIsWrong) {
  const ParsedRequest parsed = parse_completion_request(R"({"prompt": 5, "foo": 1})", kText);
  ASSERT_TRUE(std::holds_alternative<ApiError>(parsed));
  EXPECT_EQ(std::get<ApiError>(parsed).param, "foo");
}

TEST(CompletionRequest, NeverThrowsOnOddInput) {
  const std::vector<std::string> inputs = {
      std::string("\0\0\0", 3),
      "\xff\xfe\xfd",
      std::string(100000, '['),
      std::string(100000, '{'),
      "null",
      "{}",
      R"({"model": "m", "messages": [{"role": "user", "content": [{}]}]})",
      R"({"model": "m", "prompt": "\ud800"})",
      R"({"model": "m", "prompt": "a", "max_tokens": 1e400})",
      R"({"model": "m", "prompt": "a", "seed": -9223372036854775808})",
      R"({"model": "m", "prompt": "a", "top_k": 99999999999999999999999})",
  };
  for (const std::string& input : inputs) {
    for (const Endpoint endpoint : {kText, kChat}) {
      EXPECT_NO_THROW(static_cast<void>(parse_completion_request(input, endpoint)));
    }
  }
}

TEST(CompletionRequest, IgnoreEosIsABooleanExtension) {
  EXPECT_TRUE(parse_ok(R"({"model": "m", "prompt": "Hi", "ignore_eos": true})", kText).ignore_eos);
  EXPECT_FALSE(parse_ok(R"({"model": "m", "prompt": "Hi"})", kText).ignore_eos);
  const ParsedRequest parsed =
      parse_completion_request(R"({"model": "m", "prompt": "Hi", "ignore_eos": 1})", kText);
  ASSERT_TRUE(std::holds_alternative<ApiError>(parsed));
  EXPECT_EQ(std::get<ApiError>(parsed).param, "ignore_eos");
}

TEST(CompletionRequest, EndpointPaths) {
  EXPECT_EQ(endpoint_path(kText), "/v1/completions");
  EXPECT_EQ(endpoint_path(kChat), "/v1/chat/completions");
}

}  // namespace
}  // namespace selfspec::serve
