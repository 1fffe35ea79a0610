// `selfspec collect-exit-data`: training data for an early-exit draft head (EESD, issue 11),
// collected under rank-0 control at any tensor-parallel degree.
//
//   selfspec collect-exit-data --model M --prompts-file CALIB.jsonl --exit-layer N --out DIR
//       [--top-k 32] [--generate 64] [--sampled-fraction 0.5 --temperature 0.8 --seed S]
//       [--open-text] [--chat] [--resume] [--json]
//
// Steps: read the calibration prompts (the evaluation split is refused: the head is tuning), plan
// the sequences (each prompt continued by the full model — a --sampled-fraction share sampled,
// the rest greedy — and, with --open-text, each prompt's own text as it is), load the model,
// write DIR/init_layer.safetensors and DIR/frozen.safetensors (rank 0, whole tensors from the
// model's tensor source), then per sequence: generate the continuation (plain decoding), run one
// teacher-forced forward of the whole sequence (exit_data_targets.hpp: the exit layer's input and
// the full model's top-k log-probabilities at every position), and write shards of about
// --shard-positions rows with the manifest rewritten after each (exit_data_manifest.hpp), so an
// interrupted run continues with --resume. Every rank runs the same forwards; rank 0 writes.
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/sha256_digest.hpp"
#include "core/stop_request.hpp"
#include "decode/decoder.hpp"
#include "engine/engine.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "launch/prompt_suite.hpp"
#include "launch/suite_prompts.hpp"
#include "launch/training_data/exit_data_manifest.hpp"
#include "model_io/exit_head_files.hpp"
#include "training_data/exit_data_rows.hpp"
#include "training_data/exit_data_targets.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>

namespace selfspec::launch {
namespace {

constexpr const char* kInitLayerFile = "init_layer.safetensors";
constexpr const char* kFrozenFile = "frozen.safetensors";

// The tp-invariant reduction (model/reduction_order.hpp) by default where the backend has it
// (CPU): the data is then the same bits at every TP degree. A GPU collects with rank-order.
EngineCliOptions engine_with_auto_reduction() {
  EngineCliOptions engine;
  engine.reduction = "auto";
  return engine;
}

struct CollectExitDataOptions {
  EngineCliOptions engine = engine_with_auto_reduction();
  std::vector<std::string> prompts_files;
  PromptSelection selection{"calibration", {}, 0};
  ChatCli chat;
  int exit_layer = 0;
  std::int32_t top_k = 32;
  std::int64_t generate = 64;
  double sampled_fraction = 0.5;
  double temperature = 0.8;
  std::uint64_t seed = 0;
  bool open_text = false;
  std::int64_t shard_positions = 4096;
  std::int64_t chunk = 256;
  std::string out;
  bool resume = false;
  bool json = false;
};

enum class SequenceKind { kGreedy, kSampled, kOpenText };

// One planned sequence: which prompt, and how its tokens are made.
struct PlannedSequence {
  std::size_t prompt = 0;
  SequenceKind kind = SequenceKind::kGreedy;
};

// Per prompt, its continuation, then (--open-text) its own text. Continuation g is sampled when
// floor((g+1)·f) > floor(g·f): a share f of them, spread evenly, the same in every run.
std::vector<PlannedSequence> plan_sequences(std::size_t prompts, double sampled_fraction,
                                            bool open_text) {
  std::vector<PlannedSequence> plan;
  for (std::size_t p = 0; p < prompts; ++p) {
    const auto g = static_cast<double>(p);
    const bool sampled =
        std::floor((g + 1.0) * sampled_fraction) > std::floor(g * sampled_fraction);
    plan.push_back({p, sampled ? SequenceKind::kSampled : SequenceKind::kGreedy});
    if (open_text) plan.push_back({p, SequenceKind::kOpenText});
  }
  return plan;
}

std::int64_t count_kind(const std::vector<PlannedSequence>& plan, SequenceKind kind) {
  return std::count_if(plan.begin(), plan.end(),
                       [kind](const PlannedSequence& s) { return s.kind == kind; });
}

// The tuning discipline and the option ranges that need the model's config.
void check_options(const CollectExitDataOptions& o, const ModelConfig& config) {
  SELFSPEC_CHECK(o.selection.split == "calibration",
                 "--split {}: collect-exit-data trains a draft head, so it reads calibration "
                 "prompts only (evaluation prompts are kept for reports)",
                 o.selection.split);
  SELFSPEC_CHECK(o.exit_layer >= 1 && o.exit_layer < config.num_layers,
                 "--exit-layer {}: must be in [1, {}] for this {}-layer model (the exit layer "
                 "reads the output of layers [0, N))",
                 o.exit_layer, config.num_layers - 1, config.num_layers);
  SELFSPEC_CHECK(o.top_k <= config.vocab_size,
                 "--top-k {}: larger than the model's vocabulary of {} ids", o.top_k,
                 config.vocab_size);
  if (o.sampled_fraction > 0.0) {
    SELFSPEC_CHECK(o.temperature > 0.0,
                   "--temperature {}: sampled continuations (--sampled-fraction {}) need a "
                   "positive temperature",
                   o.temperature, o.sampled_fraction);
  }
}

nlohmann::ordered_json mix_json(const CollectExitDataOptions& o,
                                const std::vector<PlannedSequence>& plan, std::size_t prompts) {
  return {{"prompts", prompts},
          {"tasks", o.selection.tasks},
          {"max_prompts_per_task", o.selection.max_per_task},
          {"chat", o.chat.chat},
          {"system", o.chat.system},
          {"generate", o.generate},
          {"sampled_fraction", o.sampled_fraction},
          {"temperature", o.temperature},
          {"seed", o.seed},
          {"open_text", o.open_text},
          {"greedy", count_kind(plan, SequenceKind::kGreedy)},
          {"sampled", count_kind(plan, SequenceKind::kSampled)},
          {"open_text_sequences", count_kind(plan, SequenceKind::kOpenText)},
          {"description",
           fmt::format("per prompt: the prompt and --generate {} tokens of the full model "
                       "(sampled at temperature {} with seed --seed + sequence index for a share "
                       "{} of the prompts, greedy for the others; generation stops at EOS){}",
                       o.generate, o.temperature, o.sampled_fraction,
                       o.open_text ? "; then the prompt's own text as it is" : "")}};
}

// How the data's forwards add up the ranks' partial sums: the same bits at every TP degree
// under tp-invariant (chunks: the fixed partition's P).
nlohmann::ordered_json reduction_json(const Engine& engine) {
  const ReductionOrder order = engine.reduction_order();
  nlohmann::ordered_json json = {{"order", std::string(reduction_order_name(order))}};
  if (order == ReductionOrder::kTpInvariant) {
    json["chunks"] = tp_invariant_chunks(engine.config());
  }
  return json;
}

ExitDataManifest fresh_manifest(const CollectExitDataOptions& o, const Engine& engine,
                                const std::vector<PlannedSequence>& plan, std::size_t prompts) {
  ExitDataManifest manifest;
  manifest.settings = {{"format", kExitDataFormat},
                       {"version", kExitDataVersion},
                       {"model", exit_data_model_json(o.engine.model_name(),
                                                      engine.model_identity(), engine.config())},
                       {"exit_layer", o.exit_layer},
                       {"top_k", o.top_k},
                       {"prompts_file", fmt::format("{}", fmt::join(o.prompts_files, ","))},
                       {"prompts_sha256", sha256_of_files(o.prompts_files)},
                       {"split", o.selection.split},
                       {"mix", mix_json(o, plan, prompts)},
                       {"tp", engine.shard().tp},
                       {"reduction", reduction_json(engine)},
                       {"init_layer", kInitLayerFile},
                       {"frozen", kFrozenFile}};
  return manifest;
}

// Root: the manifest this run continues (--resume) or starts; refuses to overwrite data.
ExitDataManifest starting_manifest(const CollectExitDataOptions& o, ExitDataManifest fresh) {
  const std::filesystem::path dir(o.out);
  std::optional<ExitDataManifest> existing = load_exit_data_manifest(dir);
  if (!existing) return fresh;
  const std::string manifest = exit_data_manifest_path(dir).string();
  SELFSPEC_CHECK(o.resume, "{} exists: pass --resume to continue that collection, or remove it",
                 manifest);
  check_same_collection(*existing, fresh, manifest);
  fresh.shards = std::move(existing->shards);
  fresh.complete = existing->complete;
  return fresh;
}

// Every rank: the tokens of planned sequence `index` (rank 0's, broadcast).
std::vector<std::int32_t> make_sequence(Engine& engine, const CollectExitDataOptions& o,
                                        const PlannedSequence& planned, std::int64_t index,
                                        std::span<const std::int32_t> prompt,
                                        const std::string& prompt_text) {
  if (planned.kind == SequenceKind::kOpenText) {
    std::vector<std::int32_t> text = engine.prepare_prompt(prompt_text, {}, true);
    engine.check_context(static_cast<std::int64_t>(text.size()), 0);
    return text;
  }
  std::vector<std::int32_t> sequence(prompt.begin(), prompt.end());
  if (o.generate > 0) {
    GenerationOptions generation;
    generation.max_new_tokens = o.generate;
    generation.eos_ids = engine.eos_ids();
    // Under the tp-invariant reduction the decoder reads whole rows whatever this says.
    generation.logits = LogitsMode::kLocal;
    if (planned.kind == SequenceKind::kSampled) {
      generation.sampling.temperature = o.temperature;
      generation.sampling.seed = o.seed + static_cast<std::uint64_t>(index);
    }
    KvCache kv =
        engine.model().make_kv_cache(static_cast<std::int64_t>(prompt.size()) + o.generate);
    const GenerationResult result =
        Decoder(engine.model(), engine.comm()).generate(prompt, generation, kv);
    sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
  }
  return engine.prepare_prompt(std::nullopt, sequence, false);
}

// Root: writes the pending rows as the next shard and the manifest after it.
void flush_shard(const std::filesystem::path& dir, ExitDataManifest& manifest,
                 ExitDataRows& pending, std::int64_t& pending_sequences, double positions_per_s) {
  if (pending_sequences == 0) return;
  const std::string file = fmt::format("shard-{:05}.safetensors", manifest.shards.size());
  write_exit_data_shard(pending, dir / file);
  manifest.shards.push_back({file, pending_sequences, pending.positions()});
  save_exit_data_manifest(dir, manifest);
  log::info(
      "collect-exit-data: {} ({} sequences, {} positions); {} sequences, {} positions so far, "
      "{:.0f} positions/s",
      file, pending_sequences, pending.positions(), manifest.sequences(), manifest.positions(),
      positions_per_s);
  pending.clear();
  pending_sequences = 0;
}

// Rank 0's pending stop signal, on every rank (0: none).
int agreed_stop_signal(Communicator& comm) {
  int signal = comm.is_root() ? pending_stop_signal() : 0;
  comm.broadcast_object(signal, 0);
  return signal;
}

struct CollectionTotals {
  std::int64_t sequences = 0;
  std::int64_t positions = 0;
  double seconds = 0.0;
  int stopped_by = 0;
};

CollectionTotals collect(Engine& engine, const CollectExitDataOptions& o,
                         const std::vector<PlannedSequence>& plan,
                         const std::vector<SuitePrompt>& suite,
                         const std::vector<std::vector<std::int32_t>>& prompts,
                         ExitDataManifest& manifest, std::int64_t first) {
  Communicator& comm = engine.comm();
  const std::filesystem::path dir(o.out);
  const ExitTargetOptions targets{o.exit_layer, o.top_k, o.chunk};
  ExitDataRows pending;
  pending.hidden_size = engine.config().hidden_size;
  pending.top_k = o.top_k;
  std::int64_t pending_sequences = 0;
  CollectionTotals totals;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const auto rate = [&] {
    return static_cast<double>(totals.positions) / std::max(seconds(), 1e-9);
  };
  log::Progress progress("collecting exit data (sequences)",
                         static_cast<std::int64_t>(plan.size()) - first);
  for (auto index = first; index < static_cast<std::int64_t>(plan.size()); ++index) {
    totals.stopped_by = agreed_stop_signal(comm);
    if (totals.stopped_by != 0) break;
    const PlannedSequence& planned = plan[static_cast<std::size_t>(index)];
    const std::vector<std::int32_t> sequence = make_sequence(
        engine, o, planned, index, prompts[planned.prompt], suite[planned.prompt].text);
    const ExitDataRows rows = exit_data_targets(engine.model(), comm, sequence, index, targets);
    ++totals.sequences;
    totals.positions += static_cast<std::int64_t>(sequence.size());
    progress.update(index - first + 1);
    if (!comm.is_root()) continue;
    pending.append(rows);
    ++pending_sequences;
    if (pending.positions() >= o.shard_positions) {
      flush_shard(dir, manifest, pending, pending_sequences, rate());
    }
  }
  progress.finish();
  if (comm.is_root()) flush_shard(dir, manifest, pending, pending_sequences, rate());
  totals.seconds = seconds();
  return totals;
}

// Root: the untrained head and the frozen tensors (kept when a resumed run finds them).
void write_model_files(Engine& engine, const CollectExitDataOptions& o,
                       const std::string& identity) {
  const std::filesystem::path dir(o.out);
  engine.with_tensor_source([&](const TensorSource& source) {
    if (!o.resume || !std::filesystem::exists(dir / kInitLayerFile)) {
      write_init_layer(source, engine.config(), o.exit_layer, identity, dir / kInitLayerFile);
    }
    if (!o.resume || !std::filesystem::exists(dir / kFrozenFile)) {
      write_frozen_tensors(source, engine.config(), dir / kFrozenFile);
    }
  });
}

nlohmann::json summary_json(const CollectExitDataOptions& o, const ExitDataManifest& manifest,
                            const CollectionTotals& totals) {
  return {{"out", o.out},
          {"complete", manifest.complete},
          {"sequences", manifest.sequences()},
          {"positions", manifest.positions()},
          {"shards", manifest.shards.size()},
          {"new_sequences", totals.sequences},
          {"new_positions", totals.positions},
          {"seconds", totals.seconds},
          {"positions_per_s", totals.seconds > 0 ? totals.positions / totals.seconds : 0.0},
          {"exit_layer", o.exit_layer},
          {"top_k", o.top_k},
          {"mix", manifest.settings["mix"]}};
}

int run_collect_exit_data(const CollectExitDataOptions& o) {
  return run_job(o.engine.threads, [&](Job& job) {
    Communicator& comm = job.comm();
    Engine engine(o.engine.engine_options(), comm);
    check_options(o, engine.config());
    const std::vector<SuitePrompt> suite =
        select_prompts(read_prompt_suite(o.prompts_files), o.selection);
    const auto prompts = tokenize_suite(engine, o.chat, suite, o.generate, "--generate");
    const std::vector<PlannedSequence> plan =
        plan_sequences(suite.size(), o.sampled_fraction, o.open_text);
    ExitDataManifest manifest;
    std::int64_t first = 0;
    if (job.is_root()) {
      std::filesystem::create_directories(o.out);
      manifest = starting_manifest(o, fresh_manifest(o, engine, plan, suite.size()));
      first = manifest.complete ? static_cast<std::int64_t>(plan.size()) : manifest.sequences();
    }
    comm.broadcast_object(first, 0);
    if (first >= static_cast<std::int64_t>(plan.size())) {
      if (job.is_root()) log::info("collect-exit-data: {} is complete, nothing to do", o.out);
    } else {
      engine.load();
      if (job.is_root()) {
        write_model_files(engine, o, manifest.settings["model"]["identity"].get<std::string>());
        save_exit_data_manifest(o.out, manifest);
        log::info("collect-exit-data: {} sequences ({} done), exit layer {}, top-{}, into {}",
                  plan.size(), first, o.exit_layer, o.top_k, o.out);
      }
      const CollectionTotals totals = collect(engine, o, plan, suite, prompts, manifest, first);
      if (totals.stopped_by != 0) {
        if (job.is_root()) {
          log::info("collect-exit-data: stopped by {} after {} sequences; continue with --resume",
                    stop_signal_name(totals.stopped_by), manifest.sequences());
        }
        return stop_exit_code(totals.stopped_by);
      }
      if (!job.is_root()) return 0;
      manifest.complete = true;
      save_exit_data_manifest(o.out, manifest);
      const nlohmann::json summary = summary_json(o, manifest, totals);
      if (o.json) {
        print_json_line(summary);
      } else {
        fmt::print(
            "collect-exit-data: {} sequences, {} positions in {} shards ({} new sequences, {} "
            "positions at {:.1f} positions/s); exit layer {}, top-{}; {}\n",
            manifest.sequences(), manifest.positions(), manifest.shards.size(), totals.sequences,
            totals.positions, summary["positions_per_s"].get<double>(), o.exit_layer, o.top_k,
            o.out);
      }
      return 0;
    }
    if (job.is_root() && o.json) print_json_line(summary_json(o, manifest, {}));
    return 0;
  });
}

void add_collection_options(CLI::App& command, CollectExitDataOptions& o) {
  command
      .add_option("--exit-layer", o.exit_layer,
                  "N: the exit layer reads the residual stream after layers [0, N), 1 <= N < L")
      ->required();
  command
      .add_option("--top-k", o.top_k, "the full model's most likely next tokens kept per position")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  command
      .add_option("--generate", o.generate,
                  "tokens the full model generates after each prompt (0: the prompts only)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      .add_option("--sampled-fraction", o.sampled_fraction,
                  "share of the prompts continued by sampling (the others greedily)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command.add_option("--temperature", o.temperature, "temperature of the sampled continuations")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_seed_option(command, o.seed, "sampling seed (sequence i draws with seed + i)");
  command.add_flag("--open-text", o.open_text,
                   "also use each prompt's own text as a sequence, without generation");
  command
      .add_option("--shard-positions", o.shard_positions,
                  "positions per shard file (whole sequences: a shard ends after the sequence "
                  "that reaches it)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_prefill_chunk_option(command, o.chunk)
      ->description("positions per teacher-forced forward (bounds the logits' memory)");
  command.add_option("--out", o.out, "the data directory (manifest.json, shards, model files)")
      ->required();
  command.add_flag("--resume", o.resume,
                   "continue the collection in --out after its last whole shard");
}

}  // namespace

void add_collect_exit_data_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<CollectExitDataOptions>();
  CLI::App* command = app.add_subcommand(
      "collect-exit-data",
      "collect training data for an early-exit draft head (EESD): the input of layer N and the "
      "full model's top-k next tokens at every position of calibration sequences, resumable");
  options->engine.add_to(*command);
  add_prompt_selection_options(
      *command, options->prompts_files, options->selection,
      "prompts to collect on: calibration (evaluation prompts are refused)");
  options->chat.add_to(*command, "each prompt");
  add_collection_options(*command, *options);
  add_json_flag(*command, options->json, "the summary");
  command->callback(
      [options, &run] { run = [options] { return run_collect_exit_data(*options); }; });
}

}  // namespace selfspec::launch
