// The one place where a suite prompt's text becomes token ids (bench, count-vocab): rank 0
// tokenizes (adding the tokenizer's special tokens, BOS), every rank receives the ids. With --chat
// every rank renders the model's chat template around the text (the same text, or the same error,
// everywhere) and rank 0 encodes it without adding special tokens, as HF's
// apply_chat_template(tokenize=True).
#pragma once

#include "engine/engine.hpp"
#include "launch/options.hpp"
#include "launch/prompt_suite.hpp"

#include <cstdint>
#include <vector>

namespace selfspec::launch {

std::vector<std::int32_t> suite_prompt_ids(Engine& engine, const ChatCli& chat,
                                           const SuitePrompt& prompt);

}  // namespace selfspec::launch
