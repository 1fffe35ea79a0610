// ChatTemplate: a model's chat template (the Jinja source of GGUF `tokenizer.chat_template` or of
// tokenizer_config.json's `chat_template`), recognised as one of the families we render natively:
//   ChatML     <|im_start|>role\n content<|im_end|>\n ... [<|im_start|>assistant\n], with the
//              template's default system prompt when the first message is not a system message
//              (SmolLM2, Qwen2.5)
//   LLaMA-2    <s>[INST] <<SYS>>\n system\n<</SYS>>\n\n user [/INST] answer </s>
//   LLaMA-3    <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\n content<|eot_id|>
// apply() returns exactly the text of HF's apply_chat_template(messages, tokenize=False,
// add_generation_prompt). There is no Jinja engine here: the source is lexed (string literals,
// tags, raw text under HF's trim_blocks/lstrip_blocks) and matched against each family's
// structure; anything else — other families, and variants whose output we would not reproduce
// (dated LLaMA-3.1 system headers, thinking blocks, extra text) — is kept as unsupported, and
// apply() then throws an error naming the template (first line, size, CRC-32).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  enum class Family { kChatMl, kLlama2, kLlama3, kUnsupported };

  // The texts of the tokenizer's BOS and EOS tokens (the template's `bos_token`, `eos_token`).
  struct SpecialTexts {
    std::string bos;
    std::string eos;
  };

  // Recognises `source`; `origin` names where it came from in errors ("model.gguf: key
  // tokenizer.chat_template"). Never throws for an unknown template: apply() does.
  ChatTemplate(std::string source, SpecialTexts specials, std::string origin);

  Family family() const { return family_; }
  bool supported() const { return family_ != Family::kUnsupported; }
  // "ChatML", "LLaMA-2", "LLaMA-3" or "unsupported".
  std::string_view family_name() const;
  // ChatML: the system prompt the template inserts when the conversation has none.
  const std::optional<std::string>& default_system_prompt() const { return default_system_; }
  const std::string& source() const { return source_; }
  const std::string& origin() const { return origin_; }
  // One line for logs: the family (and default system prompt), or why it is unsupported.
  std::string describe() const;

  // The prompt text of `messages` (at least one; roles system/user/assistant; LLaMA-2 also needs
  // user/assistant turns to alternate after an optional system message, as its template
  // demands). Throws selfspec::Error naming the template when it is unsupported.
  std::string apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

 private:
  std::string apply_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt) const;
  std::string apply_llama2(std::span<const ChatMessage> messages) const;
  std::string apply_llama3(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  std::string source_;
  SpecialTexts specials_;
  std::string origin_;
  Family family_ = Family::kUnsupported;
  std::string unsupported_reason_;
  std::optional<std::string> default_system_;
};

// The messages of `generate --chat`: an optional system message, then the user's prompt.
std::vector<ChatMessage> single_turn_chat(std::string_view user,
                                          const std::optional<std::string>& system);

}  // namespace selfspec
