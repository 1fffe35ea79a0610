// The chat template of a HuggingFace model directory: chat_template.jinja, else
// tokenizer_config.json's "chat_template" (a string, or a list of {"name", "template"} from which
// the one named "default" is taken), with the template's bos_token / eos_token texts from
// tokenizer_config.json.
#pragma once

#include "tokenizer/chat_template.hpp"

#include <filesystem>
#include <optional>

namespace selfspec {

// nullopt when the directory has no chat template; throws selfspec::Error naming the file when
// tokenizer_config.json is malformed.
std::optional<ChatTemplate> find_hf_chat_template(const std::filesystem::path& model_dir);

}  // namespace selfspec
