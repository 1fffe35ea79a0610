// `selfspec bench-serving`: the batched speculative loop (decode/speculative_batch.hpp) under
// load. Requests — prompts cycled, random ids of --prompt-len or a prompt suite as `bench` reads
// them — arrive all at once or as a seeded Poisson process of --rate requests per second, and B
// slots (--concurrency) serve them, the rest waiting their turn. Each concurrency runs in every
// --modes: plain (no request speculates), fixed (every request speculates with the configured
// drafter and controller) and goodput (the same, with the batch's goodput sizing), interleaved
// within each of --rounds rounds so that the machine's noise hits all alike.
//
// Measured on rank 0, per run: wall time, generated tokens, aggregate tokens/s, and per request
// the time to first token, the inter-token gaps (a speculative round emits several tokens at once:
// many gaps are ~0), the end-to-end latency, its tokens/s, α and M; summarized per concurrency ×
// mode (percentiles, means, the loop's pass counts) with the speedup over plain decoding at the
// same concurrency and round (serving_report.hpp).
//
// Output as in `bench`: stdout carries the table, or with --json one JSON object (the table then
// goes to stderr); --out FILE writes the JSON object, --out-jsonl FILE appends one record per run
// and then the summary. --json-tokens adds each request's tokens (greedy runs are lossless: the
// same tokens in every mode and at every concurrency).
//
// Under mpirun every rank builds the same requests and runs every batch; rank 0 decides (arrivals,
// tokens) and reports.
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "core/stop_request.hpp"
#include "decode/speculative_batch.hpp"
#include "engine/engine.hpp"
#include "launch/bench/run_lines.hpp"
#include "launch/bench/serving_clock.hpp"
#include "launch/bench/serving_report.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/jsonl_writer.hpp"
#include "launch/options.hpp"
#include "launch/prompt_suite.hpp"
#include "launch/report.hpp"
#include "launch/speculative_cli.hpp"
#include "launch/suite_prompts.hpp"
#include "speculative/speculative_setup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

namespace selfspec::launch {
namespace {

const std::vector<std::string> kModes = {"plain", "fixed", "goodput"};

struct ServingOptions {
  EngineCliOptions engine;
  std::vector<std::int64_t> concurrency = {1, 2, 4, 8, 16};
  std::vector<std::string> modes = kModes;
  std::int64_t requests = 0;  // 0: one per prompt
  std::int64_t gen = 64;
  double rate = 0.0;  // requests per second; 0: all at once
  int rounds = 1;
  std::int64_t pass_tokens = SpeculativeBatchOptions{}.pass_tokens;
  std::int64_t capacity = 0;  // KV slots per sequence; 0: what the longest request needs
  std::int64_t prompt_len = 128;
  int prompts = 16;
  SamplingCli sampling;
  std::string out;
  OutputCli output;
  bool json_tokens = false;
  SpeculativeCli spec;
  std::vector<std::string> prompts_files;  // --prompts-file: a prompt suite instead of random ids
  PromptSelection selection;
  bool ignore_eos = false;  // with --prompts-file; random prompts always ignore EOS
  ChatCli chat;

  bool suite() const { return !prompts_files.empty(); }
};

using Prompts = std::vector<std::vector<std::int32_t>>;

// What every step shares; identical on every rank.
struct Serving {
  const ServingOptions& options;
  Job& job;
  Engine& engine;
  const SpeculativeConfig& spec;
  std::optional<SpeculativeSetup> setup;
  SamplingParams sampling;
  GenerationOptions generation;    // every request's, before its seed and speculative options
  std::vector<SuitePrompt> suite;  // --prompts-file: the selected prompts
  Prompts prompts;
  std::vector<double> arrivals;  // one per request, seconds from a run's start

  Communicator& comm() const { return job.comm(); }
  std::int64_t requests() const { return static_cast<std::int64_t>(arrivals.size()); }
};

// ---- Check the options, make the prompts and the requests ----

// The options that need no model: each mode known and given once, each concurrency >= 1, a rate
// >= 0, and a drafter for the speculative modes.
void check_options(const ServingOptions& options, const SpeculativeConfig& spec) {
  SELFSPEC_CHECK(!options.modes.empty(), "--modes: give at least one of {}",
                 fmt::join(kModes, ", "));
  for (std::size_t i = 0; i < options.modes.size(); ++i) {
    const std::string& mode = options.modes[i];
    SELFSPEC_CHECK(std::find(kModes.begin(), kModes.end(), mode) != kModes.end(),
                   "--modes: unknown mode '{}' (the modes are {})", mode, fmt::join(kModes, ", "));
    SELFSPEC_CHECK(std::count(options.modes.begin(), options.modes.end(), mode) == 1,
                   "--modes: '{}' is given twice", mode);
    SELFSPEC_CHECK(mode == "plain" || spec.enabled(),
                   "--modes {} speculates: give --spec layer-skip and a skip set, --spec swift or "
                   "--spec asd (or --modes plain)",
                   mode);
  }
  SELFSPEC_CHECK(!options.concurrency.empty(), "--concurrency: give at least one batch size");
  for (const std::int64_t c : options.concurrency) {
    SELFSPEC_CHECK(c >= 1, "--concurrency: {} slots; each concurrency must be at least 1", c);
  }
  SELFSPEC_CHECK(options.rate >= 0.0, "--rate: {} requests per second < 0 (0: all arrive at once)",
                 options.rate);
}

// Checks the prompts' source against the model before any weight is read, and sets up the
// drafters.
void prepare(Serving& s) {
  const ServingOptions& options = s.options;
  if (options.suite()) {
    s.suite = select_prompts(read_prompt_suite(options.prompts_files), options.selection);
  } else {
    SELFSPEC_CHECK(options.prompt_len >= 1, "--prompt-len must be >= 1");
    s.engine.check_context(options.prompt_len, options.gen);
  }
  s.setup.emplace(s.spec, s.engine, options.spec.kinds());
  s.sampling = options.sampling.params();
  GenerationOptions& g = s.generation;
  g.max_new_tokens = options.gen;
  g.ignore_eos = !options.suite() || options.ignore_eos;
  if (options.suite()) g.eos_ids = s.engine.eos_ids();
  g.sampling = s.sampling;
  g.logits = s.spec.logits.front();
  g.interrupt = pending_stop_signal;
}

// Seeded random prompts (ids >= 3 avoid the usual special tokens), made on rank 0 and broadcast.
Prompts random_prompts(Serving& s) {
  const auto vocab = static_cast<std::int32_t>(s.engine.config().vocab_size);
  boost::random::mt19937_64 rng(s.options.sampling.seed);
  boost::random::uniform_int_distribution<std::int32_t> pick(std::min<std::int32_t>(3, vocab - 1),
                                                             vocab - 1);
  Prompts prompts;
  for (int p = 0; p < s.options.prompts; ++p) {
    std::vector<std::int32_t> ids;
    if (s.job.is_root()) {
      for (std::int64_t i = 0; i < s.options.prompt_len; ++i) ids.push_back(pick(rng));
    }
    prompts.push_back(s.engine.prepare_prompt(std::nullopt, ids, false));
  }
  return prompts;
}

// The first `count` requests of a mode, each with `gen` tokens and its own seed (base + index).
std::vector<SpeculativeRequest> make_requests(const Serving& s, bool speculate, std::int64_t count,
                                              std::int64_t gen) {
  const DraftVocabulary* vocabulary =
      speculate ? s.setup->draft_vocabulary(
                      static_cast<std::int64_t>(s.setup->draft_vocab_ids().front().size()))
                : nullptr;
  std::vector<SpeculativeRequest> requests;
  for (std::int64_t r = 0; r < count; ++r) {
    SpeculativeRequest request;
    request.prompt = s.prompts[static_cast<std::size_t>(r) % s.prompts.size()];
    GenerationOptions generation = s.generation;
    generation.max_new_tokens = gen;
    generation.sampling.seed = s.sampling.seed + static_cast<std::uint64_t>(r);
    request.options = speculate ? s.setup->generation(generation, vocabulary) : generation;
    request.speculate = speculate;
    requests.push_back(std::move(request));
  }
  return requests;
}

// ---- Run ----

// One run of the batched loop: `concurrency` slots of `capacity` KV slots each (0: what the
// longest request needs), `mode`'s speculation, the requests arriving at `arrivals`. Returns the
// run (its round left to the caller) and the stop signal, if one came.
std::pair<ServingRun, int> run_once(const Serving& s, std::span<const SpeculativeRequest> requests,
                                    std::vector<double> arrivals, std::int64_t concurrency,
                                    const std::string& mode, std::int64_t capacity) {
  SpeculativeBatchOptions batch_options;
  batch_options.batch = concurrency;
  batch_options.capacity = capacity;
  batch_options.pass_tokens = s.options.pass_tokens;
  batch_options.goodput = mode == "goodput";
  SpeculativeBatch::MakeSpeculators make;
  if (mode != "plain") {
    make = [&s](std::int64_t request) {
      const std::uint64_t seed = s.sampling.seed + static_cast<std::uint64_t>(request);
      return SequenceSpeculators{s.setup->make_drafter(seed),
                                 s.setup->make_controller(s.spec.controllers.front(), seed)};
    };
  }
  SpeculativeBatch batch(s.engine.model(), s.comm(), batch_options, std::move(make));
  ServingClock clock(requests, std::move(arrivals), [] { return pending_stop_signal() != 0; });
  batch.run(requests, clock.start());
  ServingRun run;
  run.concurrency = concurrency;
  run.mode = mode;
  run.batch = batch.stats();
  const double wall_s = clock.stop();
  run.requests = std::move(clock.records());
  for (RequestRecord& record : run.requests) {
    record.prompt = record.request % static_cast<std::int64_t>(s.prompts.size());
  }
  run.figures = serving_figures(run.requests, wall_s);
  return {std::move(run), clock.interrupt_signal()};
}

// First-use costs (workspaces, pages of the weights) stay out of the measured runs: every mode
// once at the largest concurrency, a few tokens per request, all arriving at once, in KV regions
// of their own size (a request beyond --capacity is refused by the first measured run, with the
// budget it asked for).
int warm_up(const Serving& s) {
  const std::int64_t slots =
      *std::max_element(s.options.concurrency.begin(), s.options.concurrency.end());
  const std::int64_t count = std::min(s.requests(), slots);
  for (const std::string& mode : s.options.modes) {
    const std::vector<SpeculativeRequest> requests =
        make_requests(s, mode != "plain", count, std::min<std::int64_t>(s.options.gen, 4));
    const int signal =
        run_once(s, requests, std::vector<double>(requests.size(), 0.0), slots, mode, 0).second;
    if (signal != 0) return signal;
  }
  return 0;
}

struct ServingMatrix {
  std::vector<ServingRun> runs;
  int interrupted = 0;  // the stop signal, identical on every rank (it travels with the tokens)
  RunLines lines;
};

void add_run(const Serving& s, ServingRun run, ServingMatrix& matrix, JsonlWriter* jsonl) {
  matrix.runs.push_back(std::move(run));
  compare_with_plain(matrix.runs);
  const ServingRun& r = matrix.runs.back();
  if (jsonl) {
    nlohmann::json record = to_json(r, s.options.json_tokens);
    record["record"] = "run";
    jsonl->write(record);
  }
  const int total =
      s.options.rounds * static_cast<int>(s.options.concurrency.size() * s.options.modes.size());
  matrix.lines.start_run(static_cast<int>(matrix.runs.size()) - 1, total);
  if (!matrix.lines.shown()) return;
  const ServingFigures& f = r.figures;
  log::info(
      "  round {}/{}, concurrency {}, {}: {} tokens in {:.3f} s = {:.2f} tok/s{}, TTFT p50 "
      "{:.1f} ms, alpha {:.3f}, M {:.2f}{}",
      r.round + 1, s.options.rounds, r.concurrency, r.mode, f.generated_tokens, f.wall_s,
      f.tokens_per_s,
      r.speedup_vs_plain ? fmt::format(" ({:.2f}x plain)", *r.speedup_vs_plain) : std::string(),
      1e3 * f.ttft_s.p50, f.mean_acceptance_rate, f.mean_accepted_length,
      matrix.lines.hidden_note());
}

// Every round runs every concurrency in every mode, in that order. Stops at a stop signal,
// keeping the runs that finished.
ServingMatrix run_matrix(const Serving& s, JsonlWriter* jsonl) {
  ServingMatrix matrix;
  matrix.interrupted = warm_up(s);
  std::map<std::string, std::vector<SpeculativeRequest>> requests;
  for (const std::string& mode : s.options.modes) {
    requests[mode] = make_requests(s, mode != "plain", s.requests(), s.options.gen);
  }
  for (int round = 0; round < s.options.rounds && matrix.interrupted == 0; ++round) {
    for (const std::int64_t concurrency : s.options.concurrency) {
      for (const std::string& mode : s.options.modes) {
        auto [run, signal] =
            run_once(s, requests[mode], s.arrivals, concurrency, mode, s.options.capacity);
        if (signal != 0) {
          matrix.interrupted = signal;
          return matrix;
        }
        run.round = round;
        add_run(s, std::move(run), matrix, jsonl);
      }
    }
  }
  return matrix;
}

// ---- Report ----

// The model, the machine and the drafter, as `bench` describes them.
nlohmann::json run_description(const Serving& s) {
  Engine& engine = s.engine;
  nlohmann::json out;
  out["command"] = "bench-serving";
  out["model"] = s.options.engine.model_name();
  out["parameters"] = engine.config().parameter_count();
  out["weight_dtype"] = main_weight_format(engine.model().weights());
  out["kv_dtype"] = std::string(dtype_name(engine.model().kv_dtype()));
  out["weight_bytes_by_format"] = engine.model().weights().bytes_by_format();
  out["tp"] = s.comm().size();
  out["threads_per_rank"] = num_threads();
  out["isa"] = engine.backend().description().isa;
  out["backend"] = engine.backend().description().summary();
  out["load_s"] = engine.load_seconds();
  out["sampling"] = to_json(s.sampling);
  if (s.setup->enabled()) {
    out["spec"] = s.setup->describe();
    out["spec"]["controller"] = s.spec.controllers.front();
    out["spec"]["logits"] = std::string(logits_mode_name(s.spec.logits.front()));
  }
  return out;
}

// What was run: the load, the prompts and the arrivals.
nlohmann::json load_description(const Serving& s) {
  const ServingOptions& options = s.options;
  nlohmann::json out;
  out["concurrency"] = options.concurrency;
  out["modes"] = options.modes;
  out["requests"] = s.requests();
  out["gen"] = options.gen;
  out["rate"] = options.rate;
  out["rounds"] = options.rounds;
  out["pass_tokens"] = options.pass_tokens;
  out["capacity"] = options.capacity;
  out["ignore_eos"] = s.generation.ignore_eos;
  out["prompts"] = s.prompts.size();
  if (options.suite()) {
    out["prompts_files"] = options.prompts_files;
    out["split"] = options.selection.split;
    out["tasks"] = tasks_of(s.suite);
    out["chat"] = options.chat.chat;
    out["prompt_ids"] = nlohmann::json::array();
    for (const SuitePrompt& p : s.suite) out["prompt_ids"].push_back(p.id);
  } else {
    out["prompt_len"] = options.prompt_len;
  }
  out["arrivals_s"] = s.arrivals;
  return out;
}

nlohmann::json serving_json(const Serving& s, const ServingMatrix& m,
                            std::span<const ServingSummary> summaries) {
  nlohmann::json out = run_description(s);
  out.update(load_description(s));
  out["completed_runs"] = m.runs.size();
  out["interrupted"] = m.interrupted != 0;
  if (m.interrupted != 0) out["signal"] = stop_signal_name(m.interrupted);
  out["runs"] = nlohmann::json::array();
  for (const ServingRun& run : m.runs) out["runs"].push_back(to_json(run, s.options.json_tokens));
  out["summary"] = nlohmann::json::array();
  for (const ServingSummary& summary : summaries) out["summary"].push_back(to_json(summary));
  return out;
}

// Rank 0: the table (stdout, or stderr with --json), then the JSON object where asked.
void report(const Serving& s, const ServingMatrix& m, int status, JsonlWriter* jsonl) {
  const ServingOptions& options = s.options;
  if (m.interrupted != 0) {
    log::warn(
        "stopped by {} after {} completed run(s): the summary covers those; exiting with "
        "status {}",
        stop_signal_name(m.interrupted), m.runs.size(), status);
  }
  const std::vector<ServingSummary> summaries = summarize(m.runs);
  std::FILE* table = options.output.json ? stderr : stdout;
  fmt::print(table,
             "bench-serving: {} params, tp {}, {} thread(s)/rank, {} request(s) over {} prompt(s), "
             "gen {}, {}, {} round(s){}\n",
             s.engine.config().parameter_count(), s.comm().size(), num_threads(), s.requests(),
             s.prompts.size(), options.gen,
             options.rate > 0.0 ? fmt::format("{} requests/s (Poisson)", options.rate)
                                : std::string("all arriving at once"),
             options.rounds,
             s.setup->enabled() ? fmt::format(", drafter '{}'", s.setup->label()) : std::string());
  print_serving_table(table, summaries);
  std::fflush(table);
  const nlohmann::json out = serving_json(s, m, summaries);
  if (options.output.json) print_json_line(out);
  if (jsonl) {
    nlohmann::json summary = out;
    summary.erase("runs");
    summary["record"] = "summary";
    jsonl->write(summary);
  }
  if (!options.out.empty()) {
    std::ofstream file(options.out);
    SELFSPEC_CHECK(file.good(), "--out {}: cannot open for writing", options.out);
    file << out.dump(2) << "\n";
  }
}

// ---- The command ----

int run_bench_serving(const ServingOptions& options) {
  return run_job(options.engine.threads, [&](Job& job) {
    const SpeculativeConfig spec = options.spec.config();
    check_options(options, spec);
    EngineOptions engine_options = options.engine.engine_options();
    engine_options.quantized_draft_weights = spec.quantized_draft_weights();
    Engine engine(engine_options, job.comm());
    Serving s{options, job, engine, spec, std::nullopt, {}, {}, {}, {}, {}};
    prepare(s);
    if (options.suite()) {
      s.prompts = tokenize_suite(engine, options.chat, s.suite, options.gen, "--gen");
    }
    engine.load();
    s.setup->attach(engine);
    if (!options.suite()) s.prompts = random_prompts(s);
    SELFSPEC_CHECK(!s.prompts.empty(), "no prompts to serve");
    const std::int64_t requests =
        options.requests > 0 ? options.requests : static_cast<std::int64_t>(s.prompts.size());
    s.arrivals = poisson_arrivals(requests, options.rate, s.sampling.seed);
    const std::unique_ptr<JsonlWriter> jsonl = options.output.open_jsonl(job.is_root());
    const ServingMatrix matrix = run_matrix(s, jsonl.get());
    const int status = matrix.interrupted != 0 ? stop_exit_code(matrix.interrupted) : 0;
    if (job.is_root()) report(s, matrix, status, jsonl.get());
    return status;
  });
}

// --concurrency, --modes, --requests, --gen, --rate, --rounds, --pass-tokens, --capacity.
void add_load_options(CLI::App& command, ServingOptions& options) {
  command
      .add_option("--concurrency", options.concurrency,
                  "batch sizes to run (slots: requests in flight; the others wait their turn)")
      ->delimiter(',')
      ->capture_default_str();
  command
      .add_option("--modes", options.modes,
                  "plain (no request speculates), fixed (every request speculates with the "
                  "drafter and controller given), goodput (the same, drafts sized by the batch's "
                  "goodput)")
      ->delimiter(',')
      ->capture_default_str();
  command
      .add_option("--requests", options.requests,
                  "requests per run (default: one per prompt; prompts are cycled)")
      ->check(CLI::PositiveNumber);
  command.add_option("--gen", options.gen, "new tokens per request at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      .add_option("--rate", options.rate,
                  "requests per second, arriving as a Poisson process seeded by --seed (0: "
                  "all at once)")
      ->capture_default_str();
  command
      .add_option("--rounds", options.rounds,
                  "rounds; each runs every concurrency in every mode, interleaved")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("--pass-tokens", options.pass_tokens, "the most tokens of one forward")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      .add_option("--capacity", options.capacity,
                  "KV slots per sequence (0: what the longest request needs)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// Random prompts (--prompt-len, --prompts) or a prompt suite, as `bench` takes them.
void add_prompt_options(CLI::App& command, ServingOptions& options) {
  CLI::Option* prompt_len =
      command.add_option("--prompt-len", options.prompt_len, "prompt tokens (random ids)")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
  CLI::Option* prompts = command.add_option("--prompts", options.prompts, "random prompts")
                             ->check(CLI::PositiveNumber)
                             ->capture_default_str();
  CLI::Option* file =
      command
          .add_option("--prompts-file", options.prompts_files,
                      "real-text prompts instead of random ids: JSON Lines files (id, task, "
                      "split, prompt; bench/prompts/README.md), comma-separated")
          ->check(CLI::ExistingFile)
          ->delimiter(',')
          ->excludes(prompt_len)
          ->excludes(prompts);
  command
      .add_option("--split", options.selection.split,
                  "suite prompts to run: evaluation, calibration or all")
      ->check(CLI::IsMember(kPromptSplitChoices))
      ->capture_default_str()
      ->needs(file);
  command.add_option("--tasks", options.selection.tasks, "only the suite prompts of these tasks")
      ->check(CLI::IsMember(known_prompt_tasks()))
      ->delimiter(',')
      ->needs(file);
  command
      .add_option("--max-prompts-per-task", options.selection.max_per_task,
                  "at most this many suite prompts of each task (the first in file order)")
      ->check(CLI::PositiveNumber)
      ->needs(file);
  command.add_flag("--ignore-eos", options.ignore_eos,
                   "suite prompts: always generate --gen tokens (random prompts always do)");
  options.chat.add_to(command, "each suite prompt")->needs(file);
}

}  // namespace

void add_bench_serving_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<ServingOptions>();
  CLI::App* command = app.add_subcommand(
      "bench-serving",
      "the batched speculative loop under load: concurrencies x modes (plain, fixed, goodput), "
      "requests arriving at once or as a Poisson process; aggregate and per-request tokens/s, "
      "TTFT, inter-token and end-to-end latency percentiles, alpha, M, speedup over plain");
  options->engine.add_to(*command);
  add_load_options(*command, *options);
  add_prompt_options(*command, *options);
  options->sampling.add_to(*command,
                           "seed of the prompts, the arrivals and sampling (request i: seed + i)");
  command->add_option("--out", options->out, "also write the JSON result to this file");
  options->output.add_to(*command, "the table (which then goes to stderr)",
                         "one record per run, then the summary,");
  command->add_flag("--json-tokens", options->json_tokens,
                    "include each request's generated tokens in the JSON");
  options->spec.add_to(*command);
  command->callback([options, &run] { run = [options] { return run_bench_serving(*options); }; });
}

}  // namespace selfspec::launch
