// ChatTemplate (see chat_template.hpp): recognition of the template families from the outline of
// their Jinja source (jinja_outline.hpp), and their rendering, written to produce what HF's
// apply_chat_template renders from those templates (checked against it in
// tests/unit/tokenizer/chat_template_test.cpp with vectors recorded from transformers).
#include "tokenizer/chat_template.hpp"

#include "core/error.hpp"
#include "tokenizer/jinja_outline.hpp"
#include "tokenizer/utf8.hpp"

#include <fmt/format.h>
#include <boost/crc.hpp>

#include <array>

namespace selfspec {
namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kChatMlSystemHead = "<|im_start|>system\n";
constexpr std::string_view kChatMlAssistantHead = "<|im_start|>assistant\n";
constexpr std::string_view kHeaderStart = "<|start_header_id|>";
constexpr std::string_view kHeaderEnd = "<|end_header_id|>\n\n";
constexpr std::string_view kEotId = "<|eot_id|>";
constexpr std::string_view kLlama3AssistantHead =
    "<|start_header_id|>assistant<|end_header_id|>\n\n";
constexpr std::string_view kInstOpen = "[INST] ";
constexpr std::string_view kInstClose = " [/INST]";
constexpr std::string_view kSysOpen = "<<SYS>>\n";
constexpr std::string_view kSysClose = "\n<</SYS>>\n\n";

// Constructs that change the output in ways no family here reproduces.
constexpr std::array<std::string_view, 4> kUnsupportedWords = {
    "strftime_now", "date_string", "enable_thinking", "reasoning_content"};
constexpr std::array<std::string_view, 3> kUnsupportedText = {"<think>", "Cutting Knowledge Date",
                                                              "Today Date"};

// Python's str.isspace (what Jinja's trim filter and str.strip() strip): Unicode White_Space plus
// the separators U+001C..U+001F.
bool python_space(char32_t cp) {
  return utf8::is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F);
}

// Python's str.strip() on UTF-8 text (stops at an invalid byte, which a str cannot hold).
std::string python_strip(std::string_view text) {
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t n = utf8::sequence_length(text, begin);
    if (n == 0 || !python_space(utf8::decode(text, begin, n))) break;
    begin += n;
  }
  std::size_t end = text.size();
  while (end > begin) {
    std::size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    const std::size_t n = utf8::sequence_length(text, start);
    if (n != end - start || !python_space(utf8::decode(text, start, n))) break;
    end = start;
  }
  return std::string(text.substr(begin, end - begin));
}

// Why a template is unsupported, for the error apply() throws.
struct Recognition {
  ChatTemplate::Family family = ChatTemplate::Family::kUnsupported;
  std::string reason;
  std::optional<std::string> default_system;
};

Recognition unsupported(std::string reason) {
  return {ChatTemplate::Family::kUnsupported, std::move(reason), std::nullopt};
}

// Checks shared by every family; an empty string when none fails.
std::string common_problem(const JinjaOutline& outline) {
  if (outline.error)
    return fmt::format("it is not a well-formed Jinja template ({})", *outline.error);
  if (outline.raw_output) {
    return fmt::format("it outputs text outside its tags (\"{}\")",
                       outline.raw_output->substr(0, 40));
  }
  for (const std::string_view word : kUnsupportedWords) {
    if (outline.code_has_word(word)) return fmt::format("it uses '{}'", word);
  }
  for (const std::string_view text : kUnsupportedText) {
    if (outline.any_literal_contains(text)) return fmt::format("it writes \"{}\"", text);
  }
  return {};
}

// ChatML: the message frame, the generation prompt, and at most one default system prompt.
Recognition recognise_chatml(const JinjaOutline& outline) {
  if (!outline.has_literal(kImStart) ||
      !(outline.has_literal(kImEnd) || outline.any_literal_contains(std::string(kImEnd) + "\n"))) {
    return unsupported("a ChatML-like template without the '<|im_start|>' ... '<|im_end|>' frame");
  }
  if (!outline.has_literal(kChatMlAssistantHead)) {
    return unsupported(
        "a ChatML-like template whose generation prompt is not '<|im_start|>assistant\\n'");
  }
  if (outline.code_has_word("trim") || outline.code_has_word("strip")) {
    return unsupported("a ChatML-like template that trims message content");
  }
  if (outline.code_has_word("bos_token") || outline.code_has_word("eos_token")) {
    return unsupported("a ChatML-like template that writes bos_token or eos_token");
  }
  Recognition result{ChatTemplate::Family::kChatMl, {}, std::nullopt};
  for (const std::string& literal : outline.literals) {
    if (!literal.starts_with(kChatMlSystemHead)) continue;
    std::string_view body = std::string_view(literal).substr(kChatMlSystemHead.size());
    if (body.ends_with('\n')) body.remove_suffix(1);
    if (!body.ends_with(kImEnd)) continue;
    body.remove_suffix(kImEnd.size());
    if (body.empty()) continue;
    if (result.default_system && *result.default_system != body) {
      return unsupported("a ChatML-like template with two different default system prompts");
    }
    result.default_system = std::string(body);
  }
  return result;
}

Recognition recognise_llama3(const JinjaOutline& outline) {
  const bool frame = outline.has_literal(kHeaderStart) && outline.has_literal(kHeaderEnd) &&
                     outline.has_literal(kEotId) && outline.has_literal(kLlama3AssistantHead);
  if (!frame || !outline.code_has_word("bos_token") || !outline.code_has_word("trim")) {
    return unsupported(
        "a LLaMA-3-like template that differs from LLaMA-3's (header frame, bos_token, trimmed "
        "content, generation prompt)");
  }
  if (outline.code_has_word("tools")) return unsupported("a LLaMA-3-like template with tools");
  return {ChatTemplate::Family::kLlama3, {}, std::nullopt};
}

Recognition recognise_llama2(const JinjaOutline& outline) {
  if (!outline.has_literal(kSysOpen) || !outline.has_literal(kSysClose)) {
    return unsupported("an [INST] template without LLaMA-2's <<SYS>> block (Mistral-style)");
  }
  const bool frame = outline.has_literal(kInstOpen) && outline.has_literal(kInstClose);
  if (!frame || !outline.code_has_word("bos_token") || !outline.code_has_word("eos_token") ||
      !outline.code_has_word("strip")) {
    return unsupported(
        "an [INST] template that differs from LLaMA-2's (frame, bos_token/eos_token, stripped "
        "content)");
  }
  return {ChatTemplate::Family::kLlama2, {}, std::nullopt};
}

Recognition recognise(std::string_view source) {
  const JinjaOutline outline = outline_jinja(source);
  if (std::string problem = common_problem(outline); !problem.empty()) {
    return unsupported(std::move(problem));
  }
  const bool chatml = outline.any_literal_contains(kImStart);
  const bool llama3 = outline.any_literal_contains(kHeaderStart);
  const bool llama2 = outline.any_literal_contains("[INST]");
  if (static_cast<int>(chatml) + static_cast<int>(llama3) + static_cast<int>(llama2) > 1) {
    return unsupported("it mixes the markers of several template families");
  }
  if (chatml) return recognise_chatml(outline);
  if (llama3) return recognise_llama3(outline);
  if (llama2) return recognise_llama2(outline);
  return unsupported("it is none of ChatML, LLaMA-2 [INST] or LLaMA-3 headers");
}

// "first line: "...", N bytes, CRC-32 xxxxxxxx": enough to find the template again.
std::string identify(std::string_view source) {
  boost::crc_32_type crc;
  crc.process_bytes(source.data(), source.size());
  std::string_view first_line = source.substr(0, source.find('\n'));
  if (first_line.size() > 80) first_line = first_line.substr(0, 80);
  return fmt::format("first line \"{}\", {} bytes, CRC-32 {:08x}", first_line, source.size(),
                     crc.checksum());
}

void check_roles(std::span<const ChatMessage> messages, std::string_view origin) {
  SELFSPEC_CHECK(!messages.empty(), "{}: a chat needs at least one message", origin);
  for (const ChatMessage& m : messages) {
    SELFSPEC_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant",
                   "{}: unsupported chat role \"{}\" (system, user or assistant)", origin, m.role);
  }
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, SpecialTexts specials, std::string origin)
    : source_(std::move(source)), specials_(std::move(specials)), origin_(std::move(origin)) {
  Recognition r = recognise(source_);
  family_ = r.family;
  unsupported_reason_ = std::move(r.reason);
  default_system_ = std::move(r.default_system);
}

std::string_view ChatTemplate::family_name() const {
  switch (family_) {
    case Family::kChatMl:
      return "ChatML";
    case Family::kLlama2:
      return "LLaMA-2";
    case Family::kLlama3:
      return "LLaMA-3";
    case Family::kUnsupported:
      break;
  }
  return "unsupported";
}

std::string ChatTemplate::describe() const {
  if (!supported()) return fmt::format("unsupported chat template: {}", unsupported_reason_);
  if (default_system_) {
    return fmt::format("{} chat template (default system prompt \"{}\")", family_name(),
                       *default_system_);
  }
  return fmt::format("{} chat template", family_name());
}

std::string ChatTemplate::apply(std::span<const ChatMessage> messages,
                                bool add_generation_prompt) const {
  if (!supported()) {
    fail(
        "{}: unsupported chat template ({}): {}; supported are ChatML, LLaMA-2 [INST] and "
        "LLaMA-3 header templates",
        origin_, identify(source_), unsupported_reason_);
  }
  check_roles(messages, origin_);
  switch (family_) {
    case Family::kChatMl:
      return apply_chatml(messages, add_generation_prompt);
    case Family::kLlama2:
      return apply_llama2(messages);
    case Family::kLlama3:
      return apply_llama3(messages, add_generation_prompt);
    case Family::kUnsupported:
      break;
  }
  return {};
}

std::string ChatTemplate::apply_chatml(std::span<const ChatMessage> messages,
                                       bool add_generation_prompt) const {
  std::string out;
  if (default_system_ && messages.front().role != "system") {
    out += fmt::format("{}{}{}\n", kChatMlSystemHead, *default_system_, kImEnd);
  }
  for (const ChatMessage& m : messages) {
    out += fmt::format("{}{}\n{}{}\n", kImStart, m.role, m.content, kImEnd);
  }
  if (add_generation_prompt) out += kChatMlAssistantHead;
  return out;
}

// LLaMA-2 ignores add_generation_prompt: a user turn already ends in [/INST].
std::string ChatTemplate::apply_llama2(std::span<const ChatMessage> messages) const {
  std::optional<std::string_view> system;
  if (messages.front().role == "system") {
    system = messages.front().content;
    messages = messages.subspan(1);
  }
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if ((m.role == "user") != (i % 2 == 0)) {
      fail(
          "{}: the LLaMA-2 chat template needs the conversation roles to alternate "
          "user/assistant/user/assistant/... (message {} is \"{}\")",
          origin_, i + (system ? 2 : 1), m.role);
    }
    const std::string content =
        i == 0 && system ? fmt::format("{}{}{}{}", kSysOpen, *system, kSysClose, m.content)
                         : m.content;
    if (m.role == "user") {
      out += fmt::format("{}{}{}{}", specials_.bos, kInstOpen, python_strip(content), kInstClose);
    } else if (m.role == "assistant") {
      out += fmt::format(" {} {}", python_strip(content), specials_.eos);
    }
  }
  return out;
}

std::string ChatTemplate::apply_llama3(std::span<const ChatMessage> messages,
                                       bool add_generation_prompt) const {
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) out += specials_.bos;
    out += fmt::format("{}{}{}{}{}", kHeaderStart, messages[i].role, kHeaderEnd,
                       python_strip(messages[i].content), kEotId);
  }
  if (add_generation_prompt) out += kLlama3AssistantHead;
  return out;
}

std::vector<ChatMessage> single_turn_chat(std::string_view user,
                                          const std::optional<std::string>& system) {
  std::vector<ChatMessage> messages;
  if (system) messages.push_back({"system", *system});
  messages.push_back({"user", std::string(user)});
  return messages;
}

}  // namespace selfspec
