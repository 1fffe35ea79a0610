// `selfspec tokenize`: the token ids of a text, as the model's tokenizer produces them (with
// --chat, of the text as the user message of the model's chat template).
#include "core/error.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <memory>

namespace selfspec::launch {
namespace {

struct TokenizeOptions {
  std::string model_path;
  std::string tokenizer;
  std::string text;
  bool no_bos = false;
  ChatCli chat;
  bool json = false;
};

int run_tokenize(const TokenizeOptions& options) {
  std::unique_ptr<Tokenizer> tokenizer;
  if (!options.tokenizer.empty()) {
    tokenizer = load_tokenizer(options.tokenizer);
  } else {
    tokenizer = find_tokenizer(options.model_path);
    SELFSPEC_CHECK(tokenizer != nullptr,
                   "--model {}: no tokenizer.json, tokenizer.model or GGUF file with a tokenizer",
                   options.model_path);
  }
  const std::vector<std::int32_t> ids = options.chat.chat
                                            ? options.chat.encode(*tokenizer, options.text)
                                            : tokenizer->encode(options.text, !options.no_bos);
  if (options.json) {
    nlohmann::json record = {
        {"ids", ids}, {"n_tokens", ids.size()}, {"tokenizer", tokenizer->kind()}};
    if (options.chat.chat) {
      record["chat_text"] = render_chat(*tokenizer, options.chat.messages(options.text), true);
    }
    print_json_line(record);
  } else {
    fmt::print("{}\n", fmt::join(ids, " "));
  }
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* command = app.add_subcommand("tokenize", "print the token ids of a text");
  auto* model = command
                    ->add_option("--model", options->model_path,
                                 "model directory holding tokenizer.json or tokenizer.model, or a "
                                 "GGUF file (or a directory holding one)")
                    ->check(CLI::ExistingPath);
  auto* file = command
                   ->add_option("--tokenizer", options->tokenizer,
                                "tokenizer.json, tokenizer.model or a GGUF file")
                   ->check(CLI::ExistingFile);
  model->excludes(file);
  file->excludes(model);
  command->add_option("--text", options->text, "text to tokenize")->required();
  auto* no_bos = command->add_flag("--no-bos", options->no_bos, "do not add special tokens (BOS)");
  options->chat.add_to(*command, "--text")->excludes(no_bos);
  add_json_flag(*command, options->json, "the ids");
  command->callback([options, command, &run] {
    if (command->count("--model") == 0 && command->count("--tokenizer") == 0) {
      throw CLI::RequiredError("--model or --tokenizer");
    }
    run = [options] { return run_without_job([&] { return run_tokenize(*options); }); };
  });
}

}  // namespace selfspec::launch
