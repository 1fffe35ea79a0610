// A prompt suite's selected prompts as token ids (prompt_suite.hpp has the file format): each
// prompt's text tokenized, or rendered as a one-turn chat with --chat, on rank 0 and broadcast.
// Shared by the commands that read suites (bench, search-skips).
#pragma once

#include "engine/engine.hpp"
#include "launch/options.hpp"
#include "launch/prompt_suite.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace selfspec::launch {

// The one place where a suite prompt's text becomes token ids: rank 0 tokenizes (adding the
// tokenizer's special tokens, BOS), every rank receives the ids. With --chat every rank renders the
// model's chat template around the text (the same text, or the same error, everywhere) and rank 0
// encodes it without adding special tokens, as HF's apply_chat_template(tokenize=True).
std::vector<std::int32_t> suite_prompt_ids(Engine& engine, const ChatCli& chat,
                                           const SuitePrompt& prompt);

// Every selected prompt's ids, each checked to leave room for `gen` tokens in the context
// (errors name the prompt's FILE:LINE and id, and `gen_option`, the option that asked for `gen`).
// Throws when the model has no tokenizer.
std::vector<std::vector<std::int32_t>> tokenize_suite(Engine& engine, const ChatCli& chat,
                                                      const std::vector<SuitePrompt>& suite,
                                                      std::int64_t gen,
                                                      std::string_view gen_option);

}  // namespace selfspec::launch
