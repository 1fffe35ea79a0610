// `selfspec generate`: autoregressive or self-speculative generation, streamed to stdout on rank 0,
// or one JSON object as the last line with --json; --out-jsonl appends the same record to a file.
// A stop signal (SIGTERM from SLURM or mpirun, Ctrl-C) ends generation at the next step on every
// rank; the record then carries "interrupted": true and the tokens produced so far, and the exit
// status is 128 + signal.
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "core/stop_request.hpp"
#include "decode/decoder.hpp"
#include "engine/engine.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/jsonl_writer.hpp"
#include "launch/options.hpp"
#include "launch/report.hpp"
#include "launch/speculative_cli.hpp"
#include "speculative/speculative_setup.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <span>

namespace selfspec::launch {
namespace {

struct GenerateOptions {
  EngineCliOptions engine;
  std::string prompt;
  std::vector<std::int32_t> prompt_ids;
  std::int64_t max_new_tokens = 128;
  SamplingCli sampling;
  bool ignore_eos = false;
  bool no_bos = false;
  ChatCli chat;
  std::int64_t prefill_chunk = 512;
  OutputCli output;
  SpeculativeCli spec;
  std::string trace;  // --trace: one JSON line per self-speculative round
};

// What one generation produced; for self-speculative decoding also the controller's state at the
// end and the drafter's decisions (--spec asd: the skip set it chose and the cosines behind it).
struct Generated {
  GenerationResult result;
  bool speculative = false;
  nlohmann::json controller_state;
  nlohmann::json drafter_state;
  std::int64_t draft_vocab = 0;  // V' of the draft forwards' LM head; 0: the full head
};

// Plain and self-speculative decoding of one prompt.
Generated decode_autoregressive(Engine& engine, std::span<const std::int32_t> prompt,
                                const GenerationOptions& generation, KvCache& kv,
                                const TokenCallback& on_token) {
  Decoder decoder(engine.model(), engine.comm());
  return {decoder.generate(prompt, generation, kv, on_token), false, nullptr, nullptr};
}

Generated decode_speculative(Engine& engine, const SpeculativeSetup& setup,
                             const GenerateOptions& options, const GenerationOptions& generation,
                             std::span<const std::int32_t> prompt, KvCache& kv,
                             const TokenCallback& on_token) {
  const std::unique_ptr<Drafter> drafter = setup.make_drafter(options.sampling.seed);
  const std::unique_ptr<DraftLengthController> controller =
      setup.make_controller(setup.config().controllers.front(), options.sampling.seed);
  const std::vector<std::int32_t>& vocab_ids = setup.draft_vocab_ids().front();
  GenerationOptions spec = setup.generation(
      generation, setup.draft_vocabulary(static_cast<std::int64_t>(vocab_ids.size())));
  std::ofstream trace;  // --trace: rank 0 writes one JSON line per round
  if (engine.comm().is_root() && !options.trace.empty()) {
    trace.open(options.trace, std::ios::trunc);
    SELFSPEC_CHECK(trace.good(), "--trace {}: cannot open for writing", options.trace);
    spec.on_round = [&trace](const RoundReport& round) { trace << to_json(round).dump() << "\n"; };
  }
  Decoder decoder(engine.model(), engine.comm(), *drafter, *controller);
  const std::int64_t draft_vocab =
      spec.draft.vocabulary != nullptr ? spec.draft.vocabulary->size() : 0;
  GenerationResult result = decoder.generate(prompt, spec, kv, on_token);
  trace.flush();
  return {std::move(result), true, controller->state(), drafter->state(), draft_vocab};
}

// Streams the generated tokens to stdout as they come (text with a tokenizer, ids without).
class TokenPrinter {
 public:
  TokenPrinter(bool enabled, const Tokenizer* tokenizer, std::span<const std::int32_t> prompt)
      : enabled_(enabled) {
    if (enabled_ && tokenizer != nullptr) {
      stream_ = std::make_unique<StreamingDecoder>(*tokenizer, prompt);
    }
  }

  void print(std::int32_t token) {
    if (!enabled_) return;
    if (stream_) {
      fmt::print("{}", stream_->push(token));
    } else {
      fmt::print("{}{}", first_id_ ? "" : " ", token);
      first_id_ = false;
    }
    std::fflush(stdout);
  }

  // What the stream still holds back, and the end of the line.
  void finish() {
    if (!enabled_) return;
    if (stream_) fmt::print("{}", stream_->flush());
    fmt::print("\n");
    std::fflush(stdout);
  }

 private:
  bool enabled_;
  std::unique_ptr<StreamingDecoder> stream_;
  bool first_id_ = true;
};

std::vector<std::int32_t> prepare_prompt(Engine& engine, const GenerateOptions& options,
                                         const CLI::App& command) {
  if (options.chat.chat) {
    // Every rank holds the tokenizer and renders the same text (or fails the same way); rank 0
    // encodes it without special tokens, as HF's apply_chat_template(tokenize=True).
    SELFSPEC_CHECK(engine.tokenizer() != nullptr,
                   "--chat needs the model's tokenizer and chat template, but {} has no tokenizer",
                   options.engine.model_name());
    const std::string text =
        render_chat(*engine.tokenizer(), options.chat.messages(options.prompt), true);
    log::info("{}", engine.tokenizer()->chat_template()->describe());
    return engine.prepare_prompt(text, {}, false);
  }
  const bool has_text = command.count("--prompt") > 0;
  return engine.prepare_prompt(has_text ? std::optional<std::string>(options.prompt) : std::nullopt,
                               options.prompt_ids, !options.no_bos);
}

GenerationOptions generation_options(const GenerateOptions& options, const Engine& engine,
                                     const SpeculativeConfig& spec) {
  GenerationOptions generation;
  generation.max_new_tokens = options.max_new_tokens;
  generation.sampling = options.sampling.params();
  generation.ignore_eos = options.ignore_eos;
  generation.eos_ids = engine.eos_ids();
  generation.prefill_chunk = options.prefill_chunk;
  generation.logits = spec.logits.front();
  generation.interrupt = pending_stop_signal;
  return generation;
}

void log_summary(const Engine& engine, int tp, std::size_t prompt_tokens,
                 const Generated& generated, const SpeculativeSetup& setup, int status) {
  const GenerationResult& result = generated.result;
  const GenerationTimings& t = result.timings;
  log::info(
      "prompt {} tokens, generated {} (tp {}, {} threads/rank): load {:.2f} s, prefill "
      "{:.1f} tok/s, decode {:.2f} tok/s ({:.2f} ms/token)",
      prompt_tokens, result.tokens.size(), tp, num_threads(), engine.load_seconds(),
      t.prefill_tokens_per_second(), t.decode_tokens_per_second(),
      t.decode_forwards > 0 ? 1e3 * t.decode_seconds / t.decode_forwards : 0.0);
  if (generated.speculative) {
    const DecodingStats& stats = generated.result.stats;
    log::info(
        "self-speculative ({}, {} controller, {} logits, draft vocabulary {}): acceptance "
        "{:.3f}, {:.2f} tokens per verification, {} draft + {} verification forwards",
        setup.label(), setup.config().controllers.front(),
        logits_mode_name(setup.config().logits.front()),
        generated.draft_vocab > 0 ? std::to_string(generated.draft_vocab) : std::string("full"),
        stats.acceptance_rate(), stats.mean_accepted_length(), stats.draft_forwards,
        stats.verify_forwards);
  }
  if (!generated.drafter_state.is_null()) {
    log::info("drafter {}: {}", setup.config().drafter, generated.drafter_state.dump());
  }
  if (result.interrupt_signal != 0) {
    log::warn("stopped by {} after {} generated token(s); exiting with status {}",
              stop_signal_name(result.interrupt_signal), result.tokens.size(), status);
  }
}

// The JSON record of a generation (--json, --out-jsonl).
nlohmann::json generation_record(const GenerateOptions& options, const Engine& engine, int tp,
                                 std::size_t prompt_tokens, const Generated& generated,
                                 const std::string& text, const SpeculativeSetup& setup) {
  const GenerationResult& result = generated.result;
  nlohmann::json out;
  out["tokens"] = result.tokens;
  out["interrupted"] = result.interrupt_signal != 0;
  if (result.interrupt_signal != 0) out["signal"] = stop_signal_name(result.interrupt_signal);
  out["text"] = text;
  out["n_prompt"] = prompt_tokens;
  out["n_generated"] = result.tokens.size();
  out["stopped_on_eos"] = result.stopped_on_eos;
  out["tp"] = tp;
  out["threads_per_rank"] = num_threads();
  out["model"] = options.engine.model_name();
  out["sampling"] = to_json(options.sampling.params());
  out["timings"] = to_json(result.timings);
  out["timings"]["load_s"] = engine.load_seconds();
  if (generated.speculative) {
    out["spec"] = setup.describe();
    out["spec"]["controller_state"] = generated.controller_state;
    if (!generated.drafter_state.is_null()) {
      out["spec"]["drafter_state"] = generated.drafter_state;
    }
    out["spec"]["draft_vocab"] = generated.draft_vocab;
    out.update(to_json(result.stats, PhaseKeys::kSuffixed));
  }
  return out;
}

int run_generate(const GenerateOptions& options, CLI::App& command) {
  return run_job(options.engine.threads, [&](Job& job) {
    const SpeculativeConfig spec = options.spec.config();
    EngineOptions engine_options = options.engine.engine_options();
    engine_options.quantized_draft_weights = spec.quantized_draft_weights();
    Engine engine(engine_options, job.comm());
    const std::vector<std::int32_t> prompt = prepare_prompt(engine, options, command);
    engine.check_context(static_cast<std::int64_t>(prompt.size()), options.max_new_tokens);
    SpeculativeSetup setup(spec, engine, options.spec.kinds());
    const GenerationOptions generation = generation_options(options, engine, spec);
    const std::unique_ptr<JsonlWriter> jsonl = options.output.open_jsonl(job.is_root());

    engine.load();
    setup.attach(engine);
    KvCache kv = engine.model().make_kv_cache(static_cast<std::int64_t>(prompt.size()) +
                                              std::max<std::int64_t>(options.max_new_tokens, 1));
    const Tokenizer* tokenizer = engine.tokenizer();
    TokenPrinter printer(job.is_root() && !options.output.json, tokenizer, prompt);
    const auto on_token = [&](std::int32_t token) { printer.print(token); };
    const Generated generated =
        setup.enabled()
            ? decode_speculative(engine, setup, options, generation, prompt, kv, on_token)
            : decode_autoregressive(engine, prompt, generation, kv, on_token);

    const int signal = generated.result.interrupt_signal;
    const int status = signal != 0 ? stop_exit_code(signal) : 0;
    if (!job.is_root()) return status;
    std::string text;
    if (tokenizer != nullptr) text = tokenizer->decode(generated.result.tokens, true);
    printer.finish();
    const int tp = job.comm().size();
    log_summary(engine, tp, prompt.size(), generated, setup, status);
    if (options.output.json || jsonl) {
      const nlohmann::json record =
          generation_record(options, engine, tp, prompt.size(), generated, text, setup);
      if (jsonl) jsonl->write(record);
      if (options.output.json) print_json_line(record);
    }
    return status;
  });
}

}  // namespace

void add_generate_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* command = app.add_subcommand("generate", "generate text from a prompt");
  options->engine.add_to(*command);
  auto* prompt =
      command->add_option("--prompt", options->prompt, "prompt text (needs a tokenizer)");
  auto* prompt_ids = command
                         ->add_option("--prompt-ids", options->prompt_ids,
                                      "prompt token ids, comma separated (bypasses the "
                                      "tokenizer)")
                         ->delimiter(',');
  prompt->excludes(prompt_ids);
  prompt_ids->excludes(prompt);
  command->add_option("--max-new-tokens", options->max_new_tokens, "tokens to generate")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  options->sampling.add_to(*command);
  command->add_flag("--ignore-eos", options->ignore_eos, "do not stop at end-of-sequence tokens");
  auto* no_bos = command->add_flag("--no-bos", options->no_bos,
                                   "do not add the tokenizer's special tokens (BOS) to --prompt");
  auto* chat = options->chat.add_to(*command, "--prompt");
  chat->excludes(prompt_ids)->excludes(no_bos);
  add_prefill_chunk_option(*command, options->prefill_chunk);
  options->output.add_to(*command, "the streamed text", "the JSON record");
  options->spec.add_to(*command);
  command->add_option("--trace", options->trace,
                      "write one JSON line per self-speculative round to this file");
  command->callback([options, command, &run] {
    if (command->count("--prompt") == 0 && command->count("--prompt-ids") == 0) {
      throw CLI::RequiredError("--prompt or --prompt-ids");
    }
    run = [options, command] { return run_generate(*options, *command); };
  });
}

}  // namespace selfspec::launch
