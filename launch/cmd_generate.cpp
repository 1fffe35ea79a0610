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
#include "draft/layer_skip_drafter.hpp"
#include "engine/engine.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/jsonl_writer.hpp"
#include "launch/options.hpp"
#include "launch/spec_options.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

namespace selfspec::launch {
namespace {

struct GenerateOptions {
  EngineCliOptions engine;
  std::string prompt;
  std::vector<std::int32_t> prompt_ids;
  std::int64_t max_new_tokens = 128;
  double temperature = 0.0;
  std::int32_t top_k = 0;
  double top_p = 1.0;
  std::uint64_t seed = 0;
  bool ignore_eos = false;
  bool no_bos = false;
  bool json = false;
  std::string out_jsonl;
  std::int64_t prefill_chunk = 512;
  SpecCliOptions spec;
};

int run_generate(const GenerateOptions& options, CLI::App& command) {
  return run_job(options.engine.threads, [&](Job& job) {
    Engine engine(options.engine.engine_options(), job.comm());
    const bool has_text = command.count("--prompt") > 0;
    const std::vector<std::int32_t> prompt =
        engine.prepare_prompt(has_text ? std::optional<std::string>(options.prompt) : std::nullopt,
                              options.prompt_ids, !options.no_bos);
    engine.check_context(static_cast<std::int64_t>(prompt.size()), options.max_new_tokens);
    options.spec.validate(command);
    const int num_layers = static_cast<int>(engine.config().num_layers);
    std::optional<SkipSet> skips;
    if (options.spec.enabled()) skips = options.spec.skip_set(command, num_layers);

    GenerationOptions generation;
    generation.max_new_tokens = options.max_new_tokens;
    generation.sampling = {options.temperature, options.top_k, options.top_p, options.seed};
    generation.sampling.validate();
    generation.ignore_eos = options.ignore_eos;
    generation.eos_ids = engine.eos_ids();
    generation.prefill_chunk = options.prefill_chunk;
    generation.logits = options.spec.logits_mode();
    generation.interrupt = pending_stop_signal;
    std::unique_ptr<JsonlWriter> jsonl;
    if (job.is_root() && !options.out_jsonl.empty()) {
      jsonl = std::make_unique<JsonlWriter>(options.out_jsonl);
    }

    engine.load();
    LlamaModel& model = engine.model();
    KvCache kv = model.make_kv_cache(static_cast<std::int64_t>(prompt.size()) +
                                     std::max<std::int64_t>(options.max_new_tokens, 1));

    const Tokenizer* tokenizer = engine.tokenizer();
    std::unique_ptr<StreamingDecoder> stream;
    if (job.is_root() && tokenizer != nullptr) {
      stream = std::make_unique<StreamingDecoder>(*tokenizer, prompt);
    }
    const bool print_stream = job.is_root() && !options.json;
    bool first_id = true;
    const auto on_token = [&](std::int32_t token) {
      if (!print_stream) return;
      if (stream) {
        fmt::print("{}", stream->push(token));
      } else {
        fmt::print("{}{}", first_id ? "" : " ", token);
        first_id = false;
      }
      std::fflush(stdout);
    };

    GenerationResult result;
    std::optional<DecodingStats> spec_stats;
    std::unique_ptr<DraftLengthController> controller;
    if (skips) {
      LayerSkipDrafter drafter(skips->plan(num_layers), skips->name);
      ControllerOptions controller_options = options.spec.controller;
      controller_options.seed = options.seed ^ 0x7468656d70736f6eull;  // its own stream
      controller = make_draft_length_controller(controller_options);
      generation.debug_sync = options.spec.debug_sync;
      generation.trace = options.spec.trace;
      Decoder decoder(model, job.comm(), drafter, *controller);
      result = decoder.generate(prompt, generation, kv, on_token);
      spec_stats = result.stats;
    } else {
      Decoder decoder(model, job.comm());
      result = decoder.generate(prompt, generation, kv, on_token);
    }

    const int status = result.interrupt_signal != 0 ? stop_exit_code(result.interrupt_signal) : 0;
    if (!job.is_root()) return status;
    std::string text;
    if (tokenizer != nullptr) text = tokenizer->decode(result.tokens, true);
    if (print_stream) {
      if (stream) fmt::print("{}", stream->flush());
      fmt::print("\n");
      std::fflush(stdout);
    }
    const GenerationTimings& t = result.timings;
    log::info(
        "prompt {} tokens, generated {} (tp {}, {} threads/rank): load {:.2f} s, prefill "
        "{:.1f} tok/s, decode {:.2f} tok/s ({:.2f} ms/token)",
        prompt.size(), result.tokens.size(), job.comm().size(), num_threads(),
        engine.load_seconds(), t.prefill_tokens_per_second(), t.decode_tokens_per_second(),
        t.decode_forwards > 0 ? 1e3 * t.decode_seconds / t.decode_forwards : 0.0);
    if (spec_stats) {
      log::info(
          "self-speculative ({}, {} controller, {} logits): acceptance {:.3f}, {:.2f} "
          "tokens per verification, {} draft + {} verification forwards",
          skips->name, options.spec.controller.kind, options.spec.logits,
          spec_stats->acceptance_rate(), spec_stats->mean_accepted_length(),
          spec_stats->draft_forwards, spec_stats->verify_forwards);
    }
    if (result.interrupt_signal != 0) {
      log::warn("stopped by {} after {} generated token(s); exiting with status {}",
                stop_signal_name(result.interrupt_signal), result.tokens.size(), status);
    }
    if (options.json || jsonl) {
      nlohmann::json out;
      out["tokens"] = result.tokens;
      out["interrupted"] = result.interrupt_signal != 0;
      if (result.interrupt_signal != 0) out["signal"] = stop_signal_name(result.interrupt_signal);
      out["text"] = text;
      out["n_prompt"] = prompt.size();
      out["n_generated"] = result.tokens.size();
      out["stopped_on_eos"] = result.stopped_on_eos;
      out["tp"] = job.comm().size();
      out["threads_per_rank"] = num_threads();
      out["model"] = options.engine.model_name();
      out["sampling"] = {{"temperature", options.temperature},
                         {"top_k", options.top_k},
                         {"top_p", options.top_p},
                         {"seed", options.seed}};
      out["timings"] = {{"load_s", engine.load_seconds()},
                        {"prefill_s", t.prefill_seconds},
                        {"decode_s", t.decode_seconds},
                        {"prefill_tokens_per_s", t.prefill_tokens_per_second()},
                        {"decode_tokens_per_s", t.decode_tokens_per_second()},
                        {"decode_forwards", t.decode_forwards},
                        {"comm_s", t.comm_seconds}};
      if (spec_stats) {
        const DecodingStats& st = *spec_stats;
        out["spec"] = options.spec.describe(*skips, num_layers);
        out["spec"]["controller_state"] = controller->state();
        out["acceptance_rate"] = st.acceptance_rate();
        out["mean_accepted_length"] = st.mean_accepted_length();
        out["drafted"] = st.drafted;
        out["accepted"] = st.accepted;
        out["draft_forwards"] = st.draft_forwards;
        out["verify_forwards"] = st.verify_forwards;
        out["phases"] = {{"draft_s", st.phases.draft_s},
                         {"verify_s", st.phases.verify_s},
                         {"control_s", st.phases.control_s},
                         {"comm_s", st.phases.comm_s}};
      }
      if (jsonl) jsonl->write(out);
      if (options.json) {
        fmt::print("{}\n", out.dump());
        std::fflush(stdout);
      }
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
  command->add_option("--temperature", options->temperature, "0 = greedy")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--top-k", options->top_k, "keep the k most likely tokens (0 = off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--top-p", options->top_p, "nucleus sampling mass (1 = off)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command->add_option("--seed", options->seed, "sampling seed")->capture_default_str();
  command->add_flag("--ignore-eos", options->ignore_eos, "do not stop at end-of-sequence tokens");
  command->add_flag("--no-bos", options->no_bos,
                    "do not add the tokenizer's special tokens (BOS) to --prompt");
  command->add_option("--prefill-chunk", options->prefill_chunk, "prompt tokens per forward")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_flag("--json", options->json, "print one JSON object as the last line");
  command->add_option("--out-jsonl", options->out_jsonl,
                      "append the JSON record to this file (JSON Lines), flushed when written");
  options->spec.add_to(*command);
  command->callback([options, command, &run] {
    if (command->count("--prompt") == 0 && command->count("--prompt-ids") == 0) {
      throw CLI::RequiredError("--prompt or --prompt-ids");
    }
    run = [options, command] { return run_generate(*options, *command); };
  });
}

}  // namespace selfspec::launch
