// suite_prompt_ids: a suite prompt as token ids, plain or as a one-turn chat.
#include "launch/suite_prompt_ids.hpp"

#include "tokenizer/tokenizer.hpp"

namespace selfspec::launch {

std::vector<std::int32_t> suite_prompt_ids(Engine& engine, const ChatCli& chat,
                                           const SuitePrompt& prompt) {
  if (!chat.chat) return engine.prepare_prompt(prompt.text, {}, /*add_special_tokens=*/true);
  const std::string text = render_chat(*engine.tokenizer(), chat.messages(prompt.text), true);
  return engine.prepare_prompt(text, {}, /*add_special_tokens=*/false);
}

}  // namespace selfspec::launch
