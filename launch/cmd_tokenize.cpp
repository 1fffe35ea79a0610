// `selfspec tokenize`: the token ids of a text, as the model's tokenizer produces them.
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
  std::string model_dir;
  std::string tokenizer;
  std::string text;
  bool no_bos = false;
  bool json = false;
};

int run_tokenize(const TokenizeOptions& options) {
  std::unique_ptr<Tokenizer> tokenizer;
  if (!options.tokenizer.empty()) {
    tokenizer = load_tokenizer(options.tokenizer);
  } else {
    tokenizer = find_tokenizer(options.model_dir);
    SELFSPEC_CHECK(tokenizer != nullptr,
                   "--model {}: no tokenizer.json or tokenizer.model in the directory",
                   options.model_dir);
  }
  const std::vector<std::int32_t> ids = tokenizer->encode(options.text, !options.no_bos);
  if (options.json) {
    print_json_line({{"ids", ids}, {"n_tokens", ids.size()}, {"tokenizer", tokenizer->kind()}});
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
                    ->add_option("--model", options->model_dir,
                                 "model directory holding tokenizer.json or tokenizer.model")
                    ->check(CLI::ExistingDirectory);
  auto* file =
      command->add_option("--tokenizer", options->tokenizer, "tokenizer.json or tokenizer.model")
          ->check(CLI::ExistingFile);
  model->excludes(file);
  file->excludes(model);
  command->add_option("--text", options->text, "text to tokenize")->required();
  command->add_flag("--no-bos", options->no_bos, "do not add special tokens (BOS)");
  add_json_flag(*command, options->json, "the ids");
  command->callback([options, command, &run] {
    if (command->count("--model") == 0 && command->count("--tokenizer") == 0) {
      throw CLI::RequiredError("--model or --tokenizer");
    }
    run = [options] { return run_without_job([&] { return run_tokenize(*options); }); };
  });
}

}  // namespace selfspec::launch
