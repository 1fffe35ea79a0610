// `selfspec search-skips`: Draft & Verify's offline skip-set search (§3.3) on calibration prompts.
//
//   selfspec search-skips --model M --prompts-file CALIB.jsonl --method bo --budget N
//                         --out skips.json [--resume] [--acquisition ucb|ei] [--seed S]
//
// Steps: read the calibration prompts (split "calibration" only: prompts that tune are never the
// prompts a report uses), load the model, let the full model continue each prompt greedily (the
// targets), time the per-sublayer cost table (or take it from --cost-table or the resumed state),
// run the Bayesian search (src/search/skip_search.hpp: progress on stderr, every evaluation in
// the JSONL log, the state file after each one), write the best skip set as a skip-set file
// (configs/skips/README.md format), then measure the winner's real decode speed against plain
// decoding on the same prompts, side by side, and report. Runs under mpirun like generate: rank 0
// searches, every rank evaluates the same plans.
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/stop_request.hpp"
#include "decode/decoder.hpp"
#include "draft/skip_set.hpp"
#include "engine/engine.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "launch/prompt_suite.hpp"
#include "launch/speculative_cli.hpp"
#include "launch/suite_prompts.hpp"
#include "model_io/draft_vocab_file.hpp"
#include "search/calibration_set.hpp"
#include "search/matchness.hpp"
#include "search/skip_search.hpp"
#include "speculative/speculative_setup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>

namespace selfspec::launch {
namespace {

struct SearchSkipsOptions {
  EngineCliOptions engine;
  std::vector<std::string> prompts_files;
  PromptSelection selection{"calibration", {}, 0};
  ChatCli chat;
  std::string method = "bo";
  int budget = 200;
  std::string out;
  std::string state;  // default: OUT with .state.json
  std::string log;    // default: OUT with .jsonl
  bool resume = false;
  std::string acquisition = "ucb";
  double kappa = 2.0;
  std::uint64_t seed = 0;
  int initial_random = 8;
  std::int64_t tokens = 64;
  int window = 8;
  int max_draft = 12;
  double min_skip_ratio = 0.05;
  double max_skip_ratio = 0.6;
  std::string cost_table;
  int cost_rounds = 7;
  std::string controller = "adaptive";
  bool measure = true;
  bool json = false;
  std::string draft_vocab;            // --draft-vocab: a count-vocab ranking
  std::int64_t draft_vocab_size = 0;  // --draft-vocab-size: V' (with --draft-vocab)

  std::filesystem::path state_path() const {
    return state.empty() ? std::filesystem::path(out).replace_extension(".state.json")
                         : std::filesystem::path(state);
  }
  std::filesystem::path log_path() const {
    return log.empty() ? std::filesystem::path(out).replace_extension(".jsonl")
                       : std::filesystem::path(log);
  }
};

// What makes two runs the same search (--resume checks it): the model, the calibration set (its
// fingerprint hashes the prompt ids and continuations, so --chat/--system count too) and the
// optimiser's settings. The budget may grow; --cost-rounds, --controller and --no-measure do not
// change what the search evaluates (a resumed search takes the state's cost table).
nlohmann::json search_settings(const SearchSkipsOptions& o, const Engine& engine,
                               std::uint64_t calibration_hash, int tp) {
  std::error_code error;
  const auto model_bytes = std::filesystem::file_size(o.engine.model_path, error);
  return {{"method", o.method},
          {"model", o.engine.model_name()},
          {"model_bytes", error ? 0 : model_bytes},
          {"num_layers", engine.config().num_layers},
          {"tp", tp},
          {"weights_dtype", o.engine.weights_dtype},
          {"prompts_files", o.prompts_files},
          {"split", o.selection.split},
          {"tasks", o.selection.tasks},
          {"max_prompts_per_task", o.selection.max_per_task},
          {"chat", o.chat.chat},
          {"tokens", o.tokens},
          {"window", o.window},
          {"calibration", fmt::format("{:016x}", calibration_hash)},
          {"acquisition", o.acquisition},
          {"kappa", o.kappa},
          {"seed", o.seed},
          {"initial_random", o.initial_random},
          {"skip_ratio", {o.min_skip_ratio, o.max_skip_ratio}},
          {"max_draft", o.max_draft},
          {"draft_vocab", o.draft_vocab},
          {"draft_vocab_size", o.draft_vocab_size}};
}

// The calibration prompts; the evaluation split is refused (tuning discipline).
std::vector<SuitePrompt> calibration_prompts(const SearchSkipsOptions& o) {
  SELFSPEC_CHECK(o.selection.split == "calibration",
                 "--split {}: search-skips tunes a skip set, so it reads calibration prompts only "
                 "(evaluation prompts are kept for reports)",
                 o.selection.split);
  return select_prompts(read_prompt_suite(o.prompts_files), o.selection);
}

SkipSet winner_skip_set(const SearchEvaluation& best, const SkipSearchResult& result,
                        const SearchSkipsOptions& o, int layers, std::size_t n_prompts,
                        const std::vector<std::int32_t>& vocab_ids) {
  SkipSet set;
  set.draft_vocab = vocab_ids;
  set.name = std::filesystem::path(o.out).stem().string();
  set.num_layers = layers;
  set.attention = best.attention;
  set.mlp = best.mlp;
  set.source = fmt::format(
      "Draft & Verify §3.3 Bayesian search ({}, {} evaluations, seed {}) on {} calibration "
      "prompts of {}; matchness α {:.3f}, cost c {:.3f} (cost table: {}), expected speedup "
      "{:.3f}x at draft length {}",
      o.acquisition, result.evaluations.size(), o.seed, n_prompts, fmt::join(o.prompts_files, ","),
      best.alpha, best.cost, result.cost_table.device, best.objective, best.draft_length);
  return set;
}

// The winner's real decode speed against plain decoding, prompt by prompt side by side.
struct WinnerSpeed {
  double ar_tokens_per_s = 0.0;
  double spec_tokens_per_s = 0.0;
  DecodingStats stats;
  bool lossless = true;
};

// The winner drafts as a layer-skip config of the plan's skipped sublayers (as lists, so every
// rank has them without a shared file), controller C and K = --max-draft.
WinnerSpeed measure_winner(Engine& engine, const LayerPlan& plan,
                           const std::vector<CalibrationSequence>& set, const SearchSkipsOptions& o,
                           const DraftVocabulary* vocabulary) {
  const auto setup = std::make_unique<SpeculativeSetup>(
      speculative_config({{"spec", "layer-skip"},
                          {"skip-attn", plan.skipped_attention()},
                          {"skip-mlp", plan.skipped_mlp()},
                          {"controller", o.controller},
                          {"max-draft", o.max_draft}}),
      engine);
  setup->attach(engine);
  LlamaModel& model = engine.model();
  Communicator& comm = engine.comm();
  GenerationOptions plain;
  plain.max_new_tokens = o.tokens;
  plain.eos_ids = engine.eos_ids();
  plain.logits = LogitsMode::kLocal;
  const GenerationOptions generation = setup->generation(plain, vocabulary);
  WinnerSpeed speed;
  double ar_s = 0.0, spec_s = 0.0;
  std::int64_t ar_n = 0, spec_n = 0;
  log::Progress progress("measuring the winner (prompts)", static_cast<std::int64_t>(set.size()));
  for (const CalibrationSequence& s : set) {
    const auto capacity = static_cast<std::int64_t>(s.prompt.size()) + o.tokens;
    KvCache ar_kv = model.make_kv_cache(capacity);
    const GenerationResult ar = Decoder(model, comm).generate(s.prompt, generation, ar_kv);
    KvCache spec_kv = model.make_kv_cache(capacity);
    const std::unique_ptr<Drafter> drafter = setup->make_drafter(0);
    const std::unique_ptr<DraftLengthController> controller =
        setup->make_controller(o.controller, 0);
    const GenerationResult spec =
        Decoder(model, comm, *drafter, *controller).generate(s.prompt, generation, spec_kv);
    speed.lossless = speed.lossless && ar.tokens == spec.tokens;
    ar_s += ar.timings.decode_seconds;
    ar_n += ar.timings.decode_forwards;
    spec_s += spec.timings.decode_seconds;
    spec_n += spec.timings.decode_forwards;
    speed.stats += spec.stats;
    progress.update(static_cast<std::int64_t>(&s - set.data()) + 1);
  }
  progress.finish();
  speed.ar_tokens_per_s = ar_s > 0 ? static_cast<double>(ar_n) / ar_s : 0.0;
  speed.spec_tokens_per_s = spec_s > 0 ? static_cast<double>(spec_n) / spec_s : 0.0;
  return speed;
}

nlohmann::json summary_json(const SkipSearchResult& result, const SkipSet& winner,
                            const std::optional<WinnerSpeed>& speed, const SearchSkipsOptions& o) {
  const SearchEvaluation& best = result.evaluations[result.best];
  nlohmann::json out = {{"out", o.out},
                        {"state", o.state_path().string()},
                        {"log", o.log_path().string()},
                        {"evaluations", result.evaluations.size()},
                        {"resumed_from", result.resumed_from},
                        {"interrupted", result.interrupted != 0},
                        {"best", best.to_json()},
                        {"skip_set", nlohmann::json::parse(winner.describe())},
                        {"cost_table", result.cost_table.to_json()}};
  nlohmann::json uniform = nlohmann::json::array();
  for (const SearchEvaluation& e : result.evaluations) {
    if (e.phase == "initial") uniform.push_back(e.to_json());
  }
  out["uniform"] = uniform;
  if (speed) {
    out["measured"] = {
        {"ar_tokens_per_s", speed->ar_tokens_per_s},
        {"spec_tokens_per_s", speed->spec_tokens_per_s},
        {"speedup",
         speed->ar_tokens_per_s > 0 ? speed->spec_tokens_per_s / speed->ar_tokens_per_s : 0.0},
        {"alpha", speed->stats.acceptance_rate()},
        {"mean_accepted_length", speed->stats.mean_accepted_length()},
        {"controller", o.controller},
        {"lossless", speed->lossless}};
  }
  return out;
}

void print_summary(const nlohmann::json& s) {
  const nlohmann::json& best = s["best"];
  fmt::print("search-skips: {} evaluations{}; best skips {} sublayers (attention {}, mlp {})\n",
             s["evaluations"].get<int>(), s["interrupted"].get<bool>() ? " (interrupted)" : "",
             best["skipped"].get<int>(), best["attention"].dump(), best["mlp"].dump());
  fmt::print(
      "  matchness α {:.3f}, cost c {:.3f}, expected speedup {:.3f}x at draft length {} "
      "(eq. 6 with v = 1: {:.3f}x)\n",
      best["alpha"].get<double>(), best["cost"].get<double>(), best["objective"].get<double>(),
      best["draft_length"].get<int>(), best["eq6"].get<double>());
  for (const nlohmann::json& u : s["uniform"]) {
    fmt::print("  uniform start: skip {:2} α {:.3f} c {:.3f} expected {:.3f}x\n",
               u["skipped"].get<int>(), u["alpha"].get<double>(), u["cost"].get<double>(),
               u["objective"].get<double>());
  }
  if (s.contains("measured")) {
    const nlohmann::json& m = s["measured"];
    fmt::print(
        "  measured on the calibration prompts ({} controller): plain {:.2f} tok/s, "
        "searched {:.2f} tok/s = {:.3f}x, α {:.3f}, M {:.2f}, {}\n",
        m["controller"].get<std::string>(), m["ar_tokens_per_s"].get<double>(),
        m["spec_tokens_per_s"].get<double>(), m["speedup"].get<double>(), m["alpha"].get<double>(),
        m["mean_accepted_length"].get<double>(),
        m["lossless"].get<bool>() ? "token-identical" : "OUTPUT DIFFERS");
  }
  fmt::print("  skip set: {}\n  state: {}\n  log: {}\n", s["out"].get<std::string>(),
             s["state"].get<std::string>(), s["log"].get<std::string>());
}

// --draft-vocab FILE --draft-vocab-size N: the N most frequent ids (and EOS), or none.
std::vector<std::int32_t> draft_vocab_ids(const SearchSkipsOptions& o, const Engine& engine) {
  if (o.draft_vocab.empty()) return {};
  const DraftVocabFile file = load_draft_vocab_file(o.draft_vocab, "--draft-vocab");
  return select_draft_vocab(file.ids, o.draft_vocab_size, engine.eos_ids(),
                            engine.config().vocab_size, "--draft-vocab-size",
                            "--draft-vocab " + o.draft_vocab);
}

SkipSearchOptions search_options(const SearchSkipsOptions& o, nlohmann::json settings) {
  SkipSearchOptions s;
  s.budget = o.budget;
  s.acquisition = parse_acquisition(o.acquisition);
  s.ucb_kappa = o.kappa;
  s.seed = o.seed;
  s.initial_random = o.initial_random;
  s.min_skip_ratio = o.min_skip_ratio;
  s.max_skip_ratio = o.max_skip_ratio;
  s.state_file = o.state_path();
  s.log_file = o.log_path();
  s.resume = o.resume;
  if (!o.cost_table.empty()) s.cost_table_file = o.cost_table;
  s.cost.rounds = o.cost_rounds;
  s.cost.max_draft = o.max_draft;
  s.settings = std::move(settings);
  s.interrupt = pending_stop_signal;
  return s;
}

int run_search_skips(const SearchSkipsOptions& o) {
  return run_job(o.engine.threads, [&](Job& job) {
    Communicator& comm = job.comm();
    Engine engine(o.engine.engine_options(), comm);
    const std::vector<SuitePrompt> suite = calibration_prompts(o);
    const auto prompts = tokenize_suite(engine, o.chat, suite, o.tokens, "--tokens");
    if (job.is_root() && !o.resume) {
      SELFSPEC_CHECK(!std::filesystem::exists(o.state_path()),
                     "{} exists: pass --resume to continue that search, or remove it",
                     o.state_path().string());
    }
    engine.load();
    LlamaModel& model = engine.model();
    CalibrationOptions calibration;
    calibration.tokens = o.tokens;
    calibration.eos_ids = engine.eos_ids();
    std::vector<CalibrationSequence> set = build_calibration_set(model, comm, prompts, calibration);
    const std::vector<std::int32_t> vocab_ids = draft_vocab_ids(o, engine);
    std::optional<DraftVocabulary> vocabulary;
    if (!vocab_ids.empty()) vocabulary.emplace(model, vocab_ids);
    const DraftVocabulary* pruned = vocabulary ? &*vocabulary : nullptr;
    MatchnessEvaluator evaluator(model, comm, set, o.window, pruned);
    if (job.is_root()) {
      log::info("search-skips: {} calibration prompts, {} target tokens, window {}", set.size(),
                evaluator.positions(), o.window);
    }
    const nlohmann::json settings =
        search_settings(o, engine, calibration_fingerprint(set), comm.size());
    SkipSearchOptions options = search_options(o, settings);
    if (pruned != nullptr) {
      options.head_kept =
          static_cast<double>(pruned->size()) / static_cast<double>(engine.config().vocab_size);
    }
    SkipSearch search(model, comm, evaluator, options);
    const SkipSearchResult result = search.run();
    if (result.interrupted != 0) {
      if (job.is_root()) {
        log::info("search-skips: stopped by {} after {} evaluations; continue with --resume",
                  stop_signal_name(result.interrupted), result.evaluations.size());
      }
      return stop_exit_code(result.interrupted);
    }
    // Every rank needs the winner's plan for the measurement.
    std::array<std::uint64_t, LayerPlan::kMaskWords> words{};
    const int layers = static_cast<int>(engine.config().num_layers);
    SkipSet winner;
    if (job.is_root()) {
      winner = winner_skip_set(result.evaluations[result.best], result, o, layers, set.size(),
                               vocab_ids);
      save_skip_set(o.out, winner);
      winner.plan(layers).to_mask(words);
    }
    comm.broadcast_object(words, 0);
    std::optional<WinnerSpeed> speed;
    if (o.measure) {
      speed = measure_winner(engine, LayerPlan::from_mask(layers, words), set, o, pruned);
    }
    if (!job.is_root()) return 0;
    const nlohmann::json summary = summary_json(result, winner, speed, o);
    if (o.json) {
      print_json_line(summary);
    } else {
      print_summary(summary);
    }
    return speed && !speed->lossless ? 1 : 0;
  });
}

void add_search_options(CLI::App& command, SearchSkipsOptions& o) {
  command.add_option("--method", o.method, "search method: bo (Draft & Verify §3.3)")
      ->check(CLI::IsMember({"bo"}))
      ->capture_default_str();
  command
      .add_option("--budget", o.budget, "evaluations in all (a resumed search counts those done)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("--out", o.out, "the best skip set, as a skip-set file (JSON)")->required();
  command.add_option("--state", o.state, "the resumable state (default: OUT as .state.json)");
  command.add_option("--log", o.log, "every evaluation as JSON Lines (default: OUT as .jsonl)");
  command.add_flag("--resume", o.resume, "continue the search in the state file");
  command.add_option("--acquisition", o.acquisition, "ucb (mean + kappa·stddev) or ei")
      ->check(CLI::IsMember({"ucb", "ei"}))
      ->capture_default_str();
  command.add_option("--kappa", o.kappa, "UCB's exploration weight")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--seed", o.seed, "the optimiser's seed")->capture_default_str();
  command
      .add_option("--initial-random", o.initial_random,
                  "random skip sets tried after the uniform ones, before the GP leads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("--tokens", o.tokens, "target tokens generated per calibration prompt")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 20))
      ->capture_default_str();
  command.add_option("--window", o.window, "matchness window: tokens scored per draft forward")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_max_draft_option(command, o.max_draft)
      ->description("longest draft the objective considers (γ)")
      ->capture_default_str();
  command
      .add_option("--min-skip-ratio", o.min_skip_ratio,
                  "fewest sublayers a candidate skips, as a share of the 2(L-2) searchable")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command.add_option("--max-skip-ratio", o.max_skip_ratio, "most sublayers a candidate skips")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command
      .add_option("--cost-table", o.cost_table,
                  "a cost table (the 'cost_table' of a state file or JSON summary) instead "
                  "of timing one")
      ->check(CLI::ExistingFile);
  command.add_option("--cost-rounds", o.cost_rounds, "interleaved timing rounds of the cost table")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      .add_option("--controller", o.controller,
                  "draft-length controller of the winner's measurement")
      ->check(CLI::IsMember({"fixed", "threshold", "adaptive", "thompson"}))
      ->capture_default_str();
  command.add_flag("!--no-measure", o.measure,
                   "skip measuring the winner's tokens/s against plain decoding");
  CLI::Option* vocab =
      command
          .add_option("--draft-vocab", o.draft_vocab,
                      "search for drafts whose LM head keeps only the most frequent ids of this "
                      "count-vocab ranking (matchness and cost with the pruned head; the skip set "
                      "file carries the ids)")
          ->check(CLI::ExistingFile);
  command.add_option("--draft-vocab-size", o.draft_vocab_size, "V': ids kept from --draft-vocab")
      ->check(CLI::PositiveNumber)
      ->needs(vocab);
  vocab->needs("--draft-vocab-size");
}

}  // namespace

void add_search_skips_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<SearchSkipsOptions>();
  CLI::App* command = app.add_subcommand(
      "search-skips",
      "search the skip set of a layer-skip draft on calibration prompts (Draft & Verify §3.3 "
      "Bayesian optimisation of the expected speedup), resumable");
  options->engine.add_to(*command);
  add_prompt_selection_options(*command, options->prompts_files, options->selection,
                               "prompts to tune on: calibration (evaluation prompts are refused)");
  options->chat.add_to(*command, "each calibration prompt");
  add_search_options(*command, *options);
  add_json_flag(*command, options->json, "the summary");
  command->callback([options, &run] { run = [options] { return run_search_skips(*options); }; });
}

}  // namespace selfspec::launch
