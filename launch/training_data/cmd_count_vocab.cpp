// `selfspec count-vocab`: which token ids a model's drafts must be able to predict, counted on a
// calibration corpus — the ids of the prompts and of the full model's greedy continuations
// (--generate N tokens each, what drafts are verified against) — written most frequent first for
// a pruned draft vocabulary (--draft-vocab, model_io/draft_vocab_file.hpp); --batch prompts are
// generated per forward (decode/batch_generator.hpp, the same tokens). Reads the calibration
// split by default: the vocabulary is tuning, so it never sees the evaluation prompts.
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/stop_request.hpp"
#include "decode/batch_generator.hpp"
#include "engine/engine.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "launch/prompt_suite.hpp"
#include "launch/suite_prompts.hpp"
#include "launch/training_data/open_text_corpus.hpp"
#include "model_io/draft_vocab_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

namespace selfspec::launch {
namespace {

struct CountVocabOptions {
  EngineCliOptions engine;
  std::vector<std::string> prompts_files;
  PromptSelection selection{"calibration", {}, 0};
  ChatCli chat;
  std::int64_t generate = 64;
  std::int64_t batch = 8;
  OpenTextOptions open_text;
  std::string out;
  bool json = false;
};

std::string describe_source(const CountVocabOptions& options, std::size_t n_prompts,
                            const OpenTextCorpus& corpus) {
  return fmt::format(
      "{} (split {}{}): {} prompts{}, their ids and {} greedy tokens each{}",
      fmt::join(options.prompts_files, ","), options.selection.split,
      options.selection.tasks.empty()
          ? std::string()
          : fmt::format(", tasks {}", fmt::join(options.selection.tasks, ",")),
      n_prompts, options.chat.chat ? " as chats" : "", options.generate,
      corpus.windows.empty()
          ? std::string()
          : fmt::format("; {} tokens of open text from {} files under {}", corpus.tokens_kept,
                        corpus.sources.size(), fmt::join(options.open_text.paths, ",")));
}

int run_count_vocab(const CountVocabOptions& options) {
  return run_job(options.engine.threads, [&](Job& job) {
    Engine engine(options.engine.engine_options(), job.comm());
    SELFSPEC_CHECK(engine.tokenizer() != nullptr,
                   "--prompts-file needs a tokenizer, but {} has none (use --tokenizer FILE)",
                   engine.source().name);
    const std::vector<SuitePrompt> suite =
        select_prompts(read_prompt_suite(options.prompts_files), options.selection);
    std::vector<std::vector<std::int32_t>> prompts;
    for (const SuitePrompt& prompt : suite) {
      prompts.push_back(suite_prompt_ids(engine, options.chat, prompt));
      engine.check_context(static_cast<std::int64_t>(prompts.back().size()), options.generate);
    }
    const OpenTextCorpus corpus = read_open_text(engine, options.open_text);
    engine.load();
    const auto vocab = static_cast<std::size_t>(engine.config().vocab_size);
    std::vector<std::int64_t> counts(vocab, 0);
    const auto count = [&](std::span<const std::int32_t> ids) {
      for (const std::int32_t id : ids) {
        if (id >= 0 && static_cast<std::size_t>(id) < vocab) ++counts[static_cast<std::size_t>(id)];
      }
    };
    // The greedy continuations, --batch prompts per forward (decode/batch_generator.hpp: the
    // same tokens as one prompt at a time).
    std::vector<BatchRequest> requests;
    for (const std::vector<std::int32_t>& prompt : prompts) {
      requests.push_back({prompt, options.generate, {}});
    }
    BatchGeneratorOptions generation;
    generation.batch = options.batch;
    generation.eos_ids = engine.eos_ids();
    BatchGenerator generator(engine.model(), job.comm(), generation);
    int stopped_by = 0;
    // --generate 0 counts the prompts alone: nothing to run through the model.
    if (options.generate == 0) requests.clear();
    if (job.is_root() && requests.empty()) {
      for (const std::vector<std::int32_t>& prompt : prompts) count(prompt);
    }
    if (job.is_root()) {
      for (const std::vector<std::int32_t>& window : corpus.windows) count(window);
    }
    generator.run(requests, {}, [&](std::int64_t p, BatchResult&& result) {
      const auto i = static_cast<std::size_t>(p);
      if (job.is_root()) {
        count(prompts[i]);
        count(result.tokens);
        log::info("  prompt {}/{} ({} {}): {} + {} tokens", p + 1, prompts.size(), suite[i].task,
                  suite[i].id, prompts[i].size(), result.tokens.size());
      }
      stopped_by = agreed_stop_signal(job.comm());
      return stopped_by == 0;
    });
    SELFSPEC_CHECK(stopped_by == 0, "count-vocab: stopped by {}", stop_signal_name(stopped_by));
    if (!job.is_root()) return 0;
    DraftVocabFile ranked = rank_token_counts(counts);
    ranked.model = options.engine.model_name();
    ranked.source = describe_source(options, suite.size(), corpus);
    save_draft_vocab_file(options.out, ranked);
    const auto seen = std::count_if(counts.begin(), counts.end(), [](auto n) { return n > 0; });
    log::info("{}: {} of {} ids seen in {} tokens (the others follow in id order)", options.out,
              seen, vocab, ranked.tokens_counted);
    if (options.json) {
      print_json_line({{"out", options.out},
                       {"distinct_ids", seen},
                       {"tokens_counted", ranked.tokens_counted},
                       {"prompts", suite.size()}});
    }
    return 0;
  });
}

}  // namespace

void add_count_vocab_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<CountVocabOptions>();
  CLI::App* command = app.add_subcommand(
      "count-vocab",
      "count the token ids of calibration prompts and of the model's greedy continuations, most "
      "frequent first (a pruned draft vocabulary for --draft-vocab)");
  options->engine.add_to(*command);
  add_prompt_selection_options(*command, options->prompts_files, options->selection,
                               "suite prompts to count: calibration (default: tuning never reads "
                               "the evaluation prompts), evaluation or all");
  options->chat.add_to(*command, "each prompt");
  command
      ->add_option("--generate", options->generate,
                   "greedy tokens generated per prompt and counted (0: the prompts only)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      ->add_option("--batch", options->batch,
                   "prompts generated together, one forward per step for all of them")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command
      ->add_option("--open-text-files", options->open_text.paths,
                   "also count the ids of existing text: files, or directories read recursively "
                   "(tokenized only, nothing generated)")
      ->check(CLI::ExistingPath);
  command
      ->add_option("--open-text-tokens", options->open_text.max_tokens,
                   "the most open-text tokens to count, in windows drawn at random (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--out", options->out, "the JSON file to write")->required();
  add_json_flag(*command, options->json, "a summary");
  command->callback([options, &run] { run = [options] { return run_count_vocab(*options); }; });
}

}  // namespace selfspec::launch
