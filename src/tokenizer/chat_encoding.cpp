// render_chat / encode_chat (see tokenizer.hpp): a chat through the tokenizer's template.
#include "core/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace selfspec {

std::string render_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                        bool add_generation_prompt) {
  const ChatTemplate* chat_template = tokenizer.chat_template();
  SELFSPEC_CHECK(chat_template != nullptr,
                 "the model has no chat template (no tokenizer.chat_template in its GGUF file, no "
                 "chat_template in tokenizer_config.json or chat_template.jinja)");
  return chat_template->apply(messages, add_generation_prompt);
}

std::vector<std::int32_t> encode_chat(const Tokenizer& tokenizer,
                                      std::span<const ChatMessage> messages,
                                      bool add_generation_prompt) {
  return tokenizer.encode(render_chat(tokenizer, messages, add_generation_prompt), false);
}

}  // namespace selfspec
