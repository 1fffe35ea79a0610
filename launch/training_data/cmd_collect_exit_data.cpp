// `selfspec collect-exit-data`: training data for an early-exit draft head (EESD, issue 11),
// collected under rank-0 control at any tensor-parallel degree.
//
//   selfspec collect-exit-data --model M --prompts-file CALIB.jsonl --exit-layer N[,N2...]
//       --out DIR [--top-k 32] [--generate 64] [--sampled-fraction 0.5 --temperature 0.8 --seed S]
//       [--open-text] [--open-text-files PATH... --open-text-window 512 --open-text-tokens T
//        --open-text-continue G]
//       [--batch 8] [--chat] [--resume] [--json]
//
// Steps: read the calibration prompts (the evaluation split is refused: the head is tuning), plan
// the sequences (each prompt continued by the full model — a --sampled-fraction share sampled,
// the rest greedy —, with --open-text each prompt's own text as it is, and with
// --open-text-files windows of existing text: open_text_corpus.hpp, fed as they are or, with
// --open-text-continue, continued by the full model like the prompts), load the model, write
// DIR/init_layer.safetensors and DIR/frozen.safetensors (rank 0, whole tensors from the model's
// tensor source), then run the sequences --batch at a time through the batched collector
// (training_data/exit_data_collector.hpp: the continuations are generated and every position's
// exit-layer input and top-k log-probabilities are read from the same forwards, bit-identical to
// a teacher-forced forward of the finished sequence), and write shards of about
// --shard-positions rows in sequence order with the manifest rewritten after each
// (exit_data_manifest.hpp), so an interrupted run continues with --resume. Several exit layers
// (--exit-layer 2,3,4,6) are recorded by the same forwards into one directory each
// (DIR/exit-layer-N: exit_data_outputs.hpp). Every rank runs the same forwards; rank 0 writes.
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
#include "launch/training_data/exit_data_outputs.hpp"
#include "launch/training_data/open_text_corpus.hpp"
#include "model_io/exit_head_files.hpp"
#include "training_data/exit_data_collector.hpp"
#include "training_data/exit_data_rows.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>

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
  std::vector<int> exit_layers;
  std::int32_t top_k = 32;
  std::int64_t generate = 64;
  double sampled_fraction = 0.5;
  std::int64_t continuations = 1;
  double temperature = 0.8;
  std::uint64_t seed = 0;
  bool open_text = false;
  OpenTextOptions open_text_files;
  std::int64_t open_text_continue = 0;
  std::int64_t batch = 8;
  std::int64_t shard_positions = 4096;
  std::int64_t chunk = 256;
  std::string out;
  bool resume = false;
  bool json = false;
};

enum class SequenceKind { kGreedy, kSampled, kOpenText, kOpenTextFile };

// One planned sequence: which prompt (or open-text window), and how its tokens are made.
struct PlannedSequence {
  std::size_t prompt = 0;  // kOpenTextFile: the window
  SequenceKind kind = SequenceKind::kGreedy;
  bool sampled_continuation = false;  // kOpenTextFile with --open-text-continue
};

// Whether item i of a series is sampled: floor((i+1)·f) > floor(i·f), a share f spread evenly.
bool sampled_at(std::size_t i, double sampled_fraction) {
  const auto g = static_cast<double>(i);
  return std::floor((g + 1.0) * sampled_fraction) > std::floor(g * sampled_fraction);
}

// Per prompt, its continuations, then (--open-text) its own text; then the open-text windows.
// A prompt's first continuation, and a window's (--open-text-continue), is sampled as sampled_at
// says: the same share f of them in every run. A prompt's other continuations (--continuations
// K > 1) are all sampled, each from its own seed: a greedy one would repeat the first.
std::vector<PlannedSequence> plan_sequences(std::size_t prompts, double sampled_fraction,
                                            std::int64_t continuations, bool open_text,
                                            std::size_t windows) {
  std::vector<PlannedSequence> plan;
  for (std::size_t p = 0; p < prompts; ++p) {
    const bool sampled = sampled_at(p, sampled_fraction);
    plan.push_back({p, sampled ? SequenceKind::kSampled : SequenceKind::kGreedy});
    for (std::int64_t c = 1; c < continuations; ++c) plan.push_back({p, SequenceKind::kSampled});
    if (open_text) plan.push_back({p, SequenceKind::kOpenText});
  }
  for (std::size_t w = 0; w < windows; ++w) {
    plan.push_back({w, SequenceKind::kOpenTextFile, sampled_at(w, sampled_fraction)});
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
  for (std::size_t i = 0; i < o.exit_layers.size(); ++i) {
    const int n = o.exit_layers[i];
    SELFSPEC_CHECK(n >= 1 && n <= config.num_layers,
                   "--exit-layer {}: must be in [1, {}] for this {}-layer model (the exit layer "
                   "reads the output of layers [0, N); N = {} the final residual, a feature-level "
                   "head's input)",
                   n, config.num_layers, config.num_layers, config.num_layers);
    SELFSPEC_CHECK(std::count(o.exit_layers.begin(), o.exit_layers.end(), n) == 1,
                   "--exit-layer {}: listed twice", n);
  }
  SELFSPEC_CHECK(o.top_k <= config.vocab_size,
                 "--top-k {}: larger than the model's vocabulary of {} ids", o.top_k,
                 config.vocab_size);
  SELFSPEC_CHECK(o.open_text_continue == 0 || !o.open_text_files.paths.empty(),
                 "--open-text-continue {}: continues the --open-text-files windows, and there "
                 "are none",
                 o.open_text_continue);
  if (o.sampled_fraction > 0.0) {
    SELFSPEC_CHECK(o.temperature > 0.0,
                   "--temperature {}: sampled continuations (--sampled-fraction {}) need a "
                   "positive temperature",
                   o.temperature, o.sampled_fraction);
  }
  SELFSPEC_CHECK(o.continuations == 1 || o.temperature > 0.0,
                 "--temperature {}: --continuations {} samples the continuations after the "
                 "first, which needs a positive temperature",
                 o.temperature, o.continuations);
}

nlohmann::ordered_json mix_json(const CollectExitDataOptions& o,
                                const std::vector<PlannedSequence>& plan, std::size_t prompts,
                                const OpenTextCorpus& corpus) {
  return {{"prompts", prompts},
          {"tasks", o.selection.tasks},
          {"max_prompts_per_task", o.selection.max_per_task},
          {"chat", o.chat.chat},
          {"system", o.chat.system},
          {"generate", o.generate},
          {"sampled_fraction", o.sampled_fraction},
          {"continuations", o.continuations},
          {"temperature", o.temperature},
          {"seed", o.seed},
          {"open_text", o.open_text},
          {"greedy", count_kind(plan, SequenceKind::kGreedy)},
          {"sampled", count_kind(plan, SequenceKind::kSampled)},
          {"open_text_sequences", count_kind(plan, SequenceKind::kOpenText)},
          {"open_text_file_sequences", count_kind(plan, SequenceKind::kOpenTextFile)},
          {"open_text_files", open_text_json(o.open_text_files, corpus)},
          {"open_text_continue", o.open_text_continue},
          {"description",
           fmt::format("per prompt: the prompt and --generate {} tokens of the full model "
                       "(sampled at temperature {} with seed --seed + sequence index for a share "
                       "{} of the prompts, greedy for the others; generation stops at EOS){}{}",
                       o.generate, o.temperature, o.sampled_fraction,
                       o.continuations > 1 ? fmt::format(", then {} more sampled continuations",
                                                         o.continuations - 1)
                                           : std::string(),
                       o.open_text ? "; then the prompt's own text as it is" : "") +
               (corpus.windows.empty()
                    ? std::string()
                    : fmt::format("; then {} windows of at most {} tokens of existing text "
                                  "(open_text_files), teacher-forced{}",
                                  corpus.windows.size(), o.open_text_files.window,
                                  o.open_text_continue > 0
                                      ? fmt::format(", each continued by --open-text-continue {} "
                                                    "tokens of the full model (sampled for a "
                                                    "share {} of the windows, greedy for the "
                                                    "others)",
                                                    o.open_text_continue, o.sampled_fraction)
                                      : std::string()))}};
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
                                const std::vector<PlannedSequence>& plan, std::size_t prompts,
                                const OpenTextCorpus& corpus, int exit_layer) {
  ExitDataManifest manifest;
  manifest.settings = {{"format", kExitDataFormat},
                       {"version", kExitDataVersion},
                       {"model", exit_data_model_json(o.engine.model_name(),
                                                      engine.model_identity(), engine.config())},
                       {"exit_layer", exit_layer},
                       {"top_k", o.top_k},
                       {"prompts_file", fmt::format("{}", fmt::join(o.prompts_files, ","))},
                       {"prompts_sha256", sha256_of_files(o.prompts_files)},
                       {"split", o.selection.split},
                       {"mix", mix_json(o, plan, prompts, corpus)},
                       {"tp", engine.shard().tp},
                       {"reduction", reduction_json(engine)},
                       {"init_layer", kInitLayerFile},
                       {"frozen", kFrozenFile}};
  return manifest;
}

// Every rank: the request of planned sequence `index`: a prompt with its continuation's budget
// and sampling (sequence i samples with seed --seed + i), or existing text, fed only.
BatchRequest make_request(Engine& engine, const CollectExitDataOptions& o,
                          const PlannedSequence& planned, std::int64_t index,
                          const std::vector<std::vector<std::int32_t>>& prompts,
                          const std::vector<SuitePrompt>& suite, const OpenTextCorpus& corpus) {
  BatchRequest request;
  if (planned.kind == SequenceKind::kOpenTextFile) {
    request.prompt = corpus.windows[planned.prompt];
    request.max_new_tokens = o.open_text_continue;
    engine.check_context(static_cast<std::int64_t>(request.prompt.size()), o.open_text_continue);
    if (planned.sampled_continuation) {
      request.sampling.temperature = o.temperature;
      request.sampling.seed = o.seed + static_cast<std::uint64_t>(index);
    }
    return request;
  }
  if (planned.kind == SequenceKind::kOpenText) {
    request.prompt = engine.prepare_prompt(suite[planned.prompt].text, {}, true);
    engine.check_context(static_cast<std::int64_t>(request.prompt.size()), 0);
    return request;
  }
  request.prompt = prompts[planned.prompt];
  request.max_new_tokens = o.generate;
  if (planned.kind == SequenceKind::kSampled) {
    request.sampling.temperature = o.temperature;
    request.sampling.seed = o.seed + static_cast<std::uint64_t>(index);
  }
  return request;
}

struct CollectionTotals {
  std::int64_t sequences = 0;
  std::int64_t positions = 0;
  // Where the positions come from: prompts, generated continuations, existing text fed only.
  std::int64_t prompt_positions = 0;
  std::int64_t generated_positions = 0;
  std::int64_t open_text_positions = 0;
  std::int64_t forwards = 0;
  double seconds = 0.0;
  int stopped_by = 0;
};

CollectionTotals collect(Engine& engine, const CollectExitDataOptions& o,
                         const std::vector<PlannedSequence>& plan,
                         const std::vector<SuitePrompt>& suite,
                         const std::vector<std::vector<std::int32_t>>& prompts,
                         const OpenTextCorpus& corpus, ExitDataOutputs* outputs,
                         std::int64_t first) {
  Communicator& comm = engine.comm();
  std::vector<BatchRequest> requests;
  for (auto index = first; index < static_cast<std::int64_t>(plan.size()); ++index) {
    requests.push_back(make_request(engine, o, plan[static_cast<std::size_t>(index)], index,
                                    prompts, suite, corpus));
  }
  ExitDataCollectorOptions options;
  options.exit_layers = o.exit_layers;
  options.top_k = o.top_k;
  options.chunk = o.chunk;
  options.batch = o.batch;
  options.eos_ids = engine.eos_ids();
  ExitDataCollector collector(engine.model(), comm, options);
  CollectionTotals totals;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const auto rate = [&] {
    return static_cast<double>(totals.positions) / std::max(seconds(), 1e-9);
  };
  log::Progress progress("collecting exit data (sequences)",
                         static_cast<std::int64_t>(requests.size()));
  collector.run(requests, first,
                [&](std::int64_t request, std::vector<std::int32_t>&& tokens,
                    std::vector<ExitDataRows>&& rows) {
                  const auto prompt = static_cast<std::int64_t>(
                      requests[static_cast<std::size_t>(request)].prompt.size());
                  const auto length = static_cast<std::int64_t>(tokens.size());
                  ++totals.sequences;
                  totals.positions += length;
                  const SequenceKind kind = plan[static_cast<std::size_t>(first + request)].kind;
                  if (kind == SequenceKind::kOpenText || kind == SequenceKind::kOpenTextFile) {
                    totals.open_text_positions += prompt;
                  } else {
                    totals.prompt_positions += prompt;
                  }
                  totals.generated_positions += length - prompt;
                  progress.update(request + 1);
                  if (comm.is_root()) {
                    outputs->add(std::move(rows));
                    if (outputs->pending_positions() >= o.shard_positions) outputs->flush(rate());
                  }
                  totals.stopped_by = agreed_stop_signal(comm);
                  return totals.stopped_by == 0;
                });
  progress.finish();
  if (comm.is_root()) outputs->flush(rate());
  totals.forwards = collector.stats().passes;
  totals.seconds = seconds();
  return totals;
}

// Root: each directory's untrained head (its exit layer's weights; N = L: the last layer's), and
// the frozen tensors (with an untied model's embedding when N = L is recorded), the
// same for every exit layer: written into the first directory, then hard-linked (copied where
// links fail) into the others. A resumed run keeps the files it finds.
void write_model_files(Engine& engine, const CollectExitDataOptions& o, ExitDataOutputs& outputs,
                       const std::string& identity) {
  const auto missing = [&](const std::filesystem::path& file) {
    return !o.resume || !std::filesystem::exists(file);
  };
  const std::filesystem::path frozen = outputs.outputs().front().dir / kFrozenFile;
  engine.with_tensor_source([&](const TensorSource& source) {
    for (const ExitDataOutput& out : outputs.outputs()) {
      if (missing(out.dir / kInitLayerFile)) {
        write_init_layer(source, engine.config(), out.exit_layer, identity,
                         out.dir / kInitLayerFile);
      }
    }
    // A feature-level head (N = L) reads token embeddings too: an untied model's are written.
    const bool feature = std::ranges::any_of(
        o.exit_layers, [&](int n) { return n == static_cast<int>(engine.config().num_layers); });
    if (missing(frozen)) write_frozen_tensors(source, engine.config(), frozen, feature);
  });
  for (const ExitDataOutput& out : std::span(outputs.outputs()).subspan(1)) {
    const std::filesystem::path link = out.dir / kFrozenFile;
    if (!missing(link)) continue;
    std::filesystem::remove(link);
    std::error_code error;
    std::filesystem::create_hard_link(frozen, link, error);
    if (error) std::filesystem::copy_file(frozen, link);
  }
}

// Each exit layer's data directory.
std::vector<std::string> output_dirs(const ExitDataOutputs& outputs) {
  std::vector<std::string> dirs;
  for (const ExitDataOutput& out : outputs.outputs()) dirs.push_back(out.dir.string());
  return dirs;
}

nlohmann::json summary_json(const CollectExitDataOptions& o, const ExitDataOutputs& outputs,
                            const CollectionTotals& totals) {
  const ExitDataManifest& manifest = outputs.first_manifest();
  const nlohmann::json exit_layer = o.exit_layers.size() == 1
                                        ? nlohmann::json(o.exit_layers.front())
                                        : nlohmann::json(o.exit_layers);
  const auto share = [&](std::int64_t part) {
    return totals.positions > 0 ? static_cast<double>(part) / static_cast<double>(totals.positions)
                                : 0.0;
  };
  return {{"out", o.out},
          {"complete", manifest.complete},
          {"sequences", manifest.sequences()},
          {"positions", manifest.positions()},
          {"shards", manifest.shards.size()},
          {"new_sequences", totals.sequences},
          {"new_positions", totals.positions},
          {"new_positions_by_source",
           {{"prompts", totals.prompt_positions},
            {"generated", totals.generated_positions},
            {"open_text", totals.open_text_positions},
            {"generated_share", share(totals.generated_positions)},
            {"open_text_share", share(totals.open_text_positions)}}},
          {"batch", o.batch},
          {"forwards", totals.forwards},
          {"seconds", totals.seconds},
          {"positions_per_s", totals.seconds > 0 ? totals.positions / totals.seconds : 0.0},
          {"exit_layer", exit_layer},
          {"out_dirs", output_dirs(outputs)},
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
    OpenTextOptions open_text = o.open_text_files;
    open_text.seed = o.seed;
    const OpenTextCorpus corpus = read_open_text(engine, open_text);
    const std::vector<PlannedSequence> plan = plan_sequences(
        suite.size(), o.sampled_fraction, o.continuations, o.open_text, corpus.windows.size());
    std::optional<ExitDataOutputs> outputs;
    std::int64_t first = 0;
    if (job.is_root()) {
      outputs.emplace(
          o.out, o.exit_layers, engine.config().hidden_size, o.top_k,
          [&](int n) { return fresh_manifest(o, engine, plan, suite.size(), corpus, n); },
          o.resume);
      first = outputs->complete() ? static_cast<std::int64_t>(plan.size()) : outputs->sequences();
    }
    comm.broadcast_object(first, 0);
    if (first >= static_cast<std::int64_t>(plan.size())) {
      if (job.is_root()) log::info("collect-exit-data: {} is complete, nothing to do", o.out);
      if (job.is_root() && o.json) print_json_line(summary_json(o, *outputs, {}));
      return 0;
    }
    engine.load();
    if (job.is_root()) {
      write_model_files(engine, o, *outputs,
                        outputs->first_manifest().settings["model"]["identity"].get<std::string>());
      for (const ExitDataOutput& out : outputs->outputs()) {
        save_exit_data_manifest(out.dir, out.manifest);
      }
      log::info("collect-exit-data: {} sequences ({} done), exit layer {}, top-{}, into {}",
                plan.size(), first, fmt::join(o.exit_layers, ","), o.top_k,
                fmt::join(output_dirs(*outputs), ", "));
    }
    const CollectionTotals totals =
        collect(engine, o, plan, suite, prompts, corpus, outputs ? &*outputs : nullptr, first);
    if (totals.stopped_by != 0) {
      if (job.is_root()) {
        log::info("collect-exit-data: stopped by {} after {} sequences; continue with --resume",
                  stop_signal_name(totals.stopped_by), outputs->sequences());
      }
      return stop_exit_code(totals.stopped_by);
    }
    if (!job.is_root()) return 0;
    outputs->finish();
    const ExitDataManifest& manifest = outputs->first_manifest();
    const nlohmann::json summary = summary_json(o, *outputs, totals);
    if (o.json) {
      print_json_line(summary);
    } else {
      fmt::print(
          "collect-exit-data: {} sequences, {} positions in {} shards ({} new sequences, {} "
          "positions at {:.1f} positions/s, batch {}; {:.0f}% generated, {:.0f}% open text); "
          "exit layer {}, top-{}; {}\n",
          manifest.sequences(), manifest.positions(), manifest.shards.size(), totals.sequences,
          totals.positions, summary["positions_per_s"].get<double>(), o.batch,
          100.0 * summary["new_positions_by_source"]["generated_share"].get<double>(),
          100.0 * summary["new_positions_by_source"]["open_text_share"].get<double>(),
          fmt::join(o.exit_layers, ","), o.top_k, fmt::join(output_dirs(*outputs), ", "));
    }
    return 0;
  });
}

void add_collection_options(CLI::App& command, CollectExitDataOptions& o) {
  command
      .add_option("--exit-layer", o.exit_layers,
                  "N: the exit layer reads the residual stream after layers [0, N), 1 <= N <= L "
                  "(L: the final residual, a feature-level head's input); a comma-separated list "
                  "records each from the same forwards, into --out/exit-layer-N")
      ->delimiter(',')
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
  command
      .add_option("--continuations", o.continuations,
                  "continuations per prompt: the first as --sampled-fraction says, the others "
                  "sampled (each with its own seed)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  command.add_option("--temperature", o.temperature, "temperature of the sampled continuations")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_seed_option(command, o.seed, "sampling seed (sequence i draws with seed + i)");
  command.add_flag("--open-text", o.open_text,
                   "also use each prompt's own text as a sequence, without generation");
  command
      .add_option("--open-text-files", o.open_text_files.paths,
                  "existing text fed without generation: files, or directories read "
                  "recursively (e.g. scripts/get-open-text.sh's output)")
      ->check(CLI::ExistingPath);
  command
      .add_option("--open-text-window", o.open_text_files.window,
                  "tokens per open-text sequence (files are cut into windows)")
      ->check(CLI::Range(4, 1 << 20))
      ->capture_default_str();
  command
      .add_option("--open-text-tokens", o.open_text_files.max_tokens,
                  "the most open-text tokens to use, windows drawn at random with --seed (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      .add_option("--open-text-continue", o.open_text_continue,
                  "tokens the full model generates after each --open-text-files window, like "
                  "after a prompt (sampled for a --sampled-fraction share of the windows; 0: the "
                  "windows are only fed)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      .add_option("--batch", o.batch,
                  "sequences in flight, all in one forward per step (decoding streams the "
                  "weights once per forward)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
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
