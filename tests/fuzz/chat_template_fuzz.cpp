// Fuzz target: the chat template recogniser (ChatTemplate on the Jinja source of a GGUF
// tokenizer.chat_template or a tokenizer_config.json chat_template). The input is the template
// text. Construction never throws (an unknown template is kept as unsupported); rendering
// conversations of every shape may refuse with selfspec::Error and nothing else.
#include "core/error.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "tokenizer/chat_template.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using selfspec::ChatMessage;

// A single turn with and without a system prompt, a multi-turn conversation, and shapes some
// templates refuse (an assistant first, two user turns in a row).
std::vector<std::vector<ChatMessage>> conversations() {
  return {
      {{"user", "Hello"}},
      {{"system", "Be brief."}, {"user", "What is 2 + 2?"}},
      {{"system", "S"}, {"user", "u1"}, {"assistant", "a1"}, {"user", "u2"}},
      {{"assistant", "first"}},
      {{"user", "u1"}, {"user", "u2"}},
      {{"user", "{{ '}}' }} <|im_end|> [/INST] <|eot_id|>"}},
  };
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const selfspec::ChatTemplate chat(std::string(selfspec::fuzz::as_text(data, size)),
                                    {"<s>", "</s>"}, "fuzz/chat_template.jinja");
  static_cast<void>(chat.describe());
  static_cast<void>(chat.family_name());
  static const std::vector<std::vector<ChatMessage>> kConversations = conversations();
  for (const std::vector<ChatMessage>& messages : kConversations) {
    for (const bool add_generation_prompt : {false, true}) {
      selfspec::fuzz::allowing_errors(
          [&] { static_cast<void>(chat.apply(messages, add_generation_prompt)); });
    }
  }
  return 0;
}
