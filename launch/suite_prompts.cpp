// A prompt suite's prompts as token ids: see suite_prompts.hpp.
#include "launch/suite_prompts.hpp"

#include "core/error.hpp"
#include "tokenizer/chat_template.hpp"

namespace selfspec::launch {

std::vector<std::int32_t> suite_prompt_ids(Engine& engine, const ChatCli& chat,
                                           const SuitePrompt& prompt) {
  if (!chat.chat) return engine.prepare_prompt(prompt.text, {}, /*add_special_tokens=*/true);
  const std::string text = render_chat(*engine.tokenizer(), chat.messages(prompt.text), true);
  return engine.prepare_prompt(text, {}, /*add_special_tokens=*/false);
}

std::vector<std::vector<std::int32_t>> tokenize_suite(Engine& engine, const ChatCli& chat,
                                                      const std::vector<SuitePrompt>& suite,
                                                      std::int64_t gen,
                                                      std::string_view gen_option) {
  SELFSPEC_CHECK(engine.tokenizer() != nullptr,
                 "--prompts-file needs a tokenizer, but {} has none (no tokenizer.json or "
                 "tokenizer.model; use --tokenizer FILE)",
                 engine.source().name);
  std::vector<std::vector<std::int32_t>> prompts;
  for (const SuitePrompt& prompt : suite) {
    prompts.push_back(suite_prompt_ids(engine, chat, prompt));
    const auto n = static_cast<std::int64_t>(prompts.back().size());
    SELFSPEC_CHECK(n + gen <= engine.context_limit(),
                   "{}: prompt '{}' is {} tokens; with {} {} that is {} tokens, longer than the "
                   "context of {} tokens",
                   prompt.source, prompt.id, n, gen_option, gen, n + gen, engine.context_limit());
  }
  return prompts;
}

}  // namespace selfspec::launch
