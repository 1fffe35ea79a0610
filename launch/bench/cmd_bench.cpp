// `selfspec bench`: end-to-end speed of one model on this machine, measured side by side in one
// run (these machines are noisy: only ratios measured together are trusted).
//
// Always: the machine's streaming read/copy bandwidth (all ranks at once), prefill tokens/s,
// autoregressive decode ms/token and tokens/s, the bytes one decode step reads (weights + KV
// cache, all ranks) and the resulting effective bandwidth as a fraction of the measured read
// bandwidth.
//
// With --spec: for every prompt, autoregressive decoding and then self-speculative decoding with
// each requested controller × logits mode, on the same prompt. Per configuration it reports the
// measured speedup, the acceptance rate α (accepted ÷ drafted), the mean accepted length M (tokens
// per verification forward), the measured draft/target cost ratio c (mean draft forward time ÷
// mean autoregressive forward time), the expected speedup of SWIFT App. B.3 eq. 6,
//   E = Mα / ((M − 1)c + α),
// and efficiency = measured ÷ expected: the fraction of the algorithm's promise the engine
// delivers (eq. 6 assumes a verification forward costs what a 1-token forward costs; the measured
// verification/decode cost ratio is reported beside it). Greedy runs also check that the
// speculative tokens equal the autoregressive ones.
//
// With --prompts-file (and --spec): real-text prompts from JSON Lines files (prompt_suite.hpp;
// bench/prompts/, scripts/get-prompts.sh humaneval) instead of random ids, filtered by --split,
// --tasks and --max-prompts-per-task, each prompt as it is or, with --chat, as a one-turn chat in
// the model's template, generating up to --gen tokens each (stopping at an end-of-sequence id
// unless --ignore-eos). The same runs, then per configuration the medians over
// prompts per task and overall (suite_report.hpp) and one record per prompt; the bandwidth
// figures are left out.
//
// Output, as in the other commands: stdout carries the result — the summary table, or with --json
// one JSON object instead (the table then goes to stderr, beside the progress lines). --out FILE
// writes the JSON object to FILE and --out-jsonl FILE appends one record per finished run and then
// the summary, with or without --json.
//
// Steps: measure the bandwidth (not with --prompts-file), make the prompts, run the matrix
// (autoregressive and every speculative configuration per prompt, one JSONL record per run), then
// compute and report.
#include "backend/huge_pages.hpp"
#include "backend/memory_bandwidth.hpp"
#include "core/error.hpp"
#include "core/human_units.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "core/stop_request.hpp"
#include "decode/decoder.hpp"
#include "decode/decoding_run.hpp"
#include "engine/engine.hpp"
#include "kernels/cpu/amx_probe.hpp"
#include "launch/bench/bench_report.hpp"
#include "launch/bench/bench_stats.hpp"
#include "launch/bench/run_lines.hpp"
#include "launch/bench/suite_figures.hpp"
#include "launch/bench/suite_report.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/jsonl_writer.hpp"
#include "launch/options.hpp"
#include "launch/prompt_suite.hpp"
#include "launch/speculative_cli.hpp"
#include "launch/suite_prompts.hpp"
#include "model/forward_timing.hpp"
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
#include <span>

namespace selfspec::launch {
namespace {

struct BenchOptions {
  EngineCliOptions engine;
  std::int64_t prompt_len = 128;
  std::int64_t gen = 64;
  int reps = 3;
  int prompts = 4;
  SamplingCli sampling;
  double bandwidth_mb = 0.0;
  std::string out;
  OutputCli output;
  SpeculativeCli spec;
  std::vector<std::string> prompts_files;  // --prompts-file: a prompt suite instead of random ids
  PromptSelection selection;
  bool ignore_eos = false;     // with --prompts-file; random prompts always ignore EOS
  ChatCli chat;                // with --prompts-file: each prompt as a one-turn chat
  int verify_cost_rounds = 5;  // v(γ) rounds (0: not measured); random prompts only
  int verify_cost_max = 8;     // v(γ) for γ = 1 … this

  bool suite() const { return !prompts_files.empty(); }
};

// What every step of a run shares; identical on every rank.
struct Bench {
  const BenchOptions& options;
  Job& job;
  Engine& engine;
  const SpeculativeConfig& spec;          // the self-speculative settings (speculative_cli)
  std::optional<SpeculativeSetup> setup;  // drafters, controllers, draft vocabularies
  SamplingParams sampling;
  GenerationOptions generation;
  std::vector<SuitePrompt> suite;  // --prompts-file: the selected prompts, in run order

  Communicator& comm() const { return job.comm(); }
  bool speculative() const { return spec.enabled(); }
  // How tables name the skip set: "'NAME' (K of 2L sublayers)", or asd's "(chosen per prompt)".
  std::string skip_summary() const {
    const std::string label = setup->label();
    const SkipSet* skips = setup->skip_set();
    if (skips == nullptr) return fmt::format("'{}' (chosen per prompt)", label);
    return fmt::format("'{}' ({} of {} sublayers)", label,
                       skips->plan(num_layers()).skipped_count(), 2 * num_layers());
  }
  int num_layers() const { return static_cast<int>(engine.config().num_layers); }
  // How progress lines and JSONL records name a prompt: its task and id with --prompts-file.
  std::string prompt_label(int run) const {
    if (suite.empty()) return "";
    const SuitePrompt& p = suite[static_cast<std::size_t>(run)];
    return fmt::format(" ({} {})", p.task, p.id);
  }
  nlohmann::json prompt_tags(int run) const {
    if (suite.empty()) return nlohmann::json::object();
    const SuitePrompt& p = suite[static_cast<std::size_t>(run)];
    return {{"id", p.id}, {"task", p.task}};
  }
};

using Prompts = std::vector<std::vector<std::int32_t>>;

// What one speculative run produced.
struct SpeculativeRun {
  GenerationResult result;
  nlohmann::json controller_state;  // at the end of the run
  nlohmann::json drafter_state;     // what the drafter decided or learned (asd, swift), or null
};

// Plain and self-speculative decoding of one prompt.
GenerationResult decode_autoregressive(const Bench& bench, std::span<const std::int32_t> prompt,
                                       const GenerationOptions& generation, KvCache& kv) {
  Decoder decoder(bench.engine.model(), bench.comm());
  return decoder.generate(prompt, generation, kv);
}

// A configuration's drafter. It lives as long as the configuration's runs, so a drafter that
// learns (swift) carries what it learned from prompt to prompt, as SWIFT does between instances.
std::unique_ptr<Drafter> make_drafter(const Bench& bench) {
  return bench.setup->make_drafter(bench.sampling.seed);
}

SpeculativeRun decode_speculative(const Bench& bench, const SpecTotals& config, Drafter& drafter,
                                  std::span<const std::int32_t> prompt,
                                  const GenerationOptions& generation, KvCache& kv) {
  const std::unique_ptr<DraftLengthController> controller =
      bench.setup->make_controller(config.controller, bench.sampling.seed);
  GenerationOptions spec =
      bench.setup->generation(generation, bench.setup->draft_vocabulary(config.draft_vocab));
  spec.logits = config.logits;
  Decoder decoder(bench.engine.model(), bench.comm(), drafter, *controller);
  GenerationResult result = decoder.generate(prompt, spec, kv);
  return {std::move(result), controller->state(), drafter.state()};
}

// ---- Measure the bandwidth, make the prompts ----

MemoryBandwidth measure_bandwidth(Communicator& comm, const BenchOptions& options) {
  log::info("measuring memory bandwidth ({} rank(s) x {} thread(s))", comm.size(), num_threads());
  const MemoryBandwidth bandwidth =
      measure_memory_bandwidth(comm, static_cast<std::uint64_t>(options.bandwidth_mb * 1e6));
  log::info("  read {:.1f} GB/s per rank, {:.1f} GB/s all ranks; copy {:.1f} GB/s all ranks",
            bandwidth.read_gbps, bandwidth.aggregate_read_gbps, bandwidth.aggregate_copy_gbps);
  return bandwidth;
}

// Seeded random prompts (ids >= 3 avoid the usual special tokens), made on rank 0: one per
// --prompts with --spec, else one for every repetition.
Prompts random_prompts(const Bench& bench) {
  const BenchOptions& options = bench.options;
  const auto vocab = static_cast<std::int32_t>(bench.engine.config().vocab_size);
  const int n_prompts = bench.speculative() ? options.prompts : 1;
  boost::random::mt19937_64 rng(options.sampling.seed);
  boost::random::uniform_int_distribution<std::int32_t> pick(std::min<std::int32_t>(3, vocab - 1),
                                                             vocab - 1);
  Prompts prompts;
  for (int p = 0; p < n_prompts; ++p) {
    std::vector<std::int32_t> ids;
    if (bench.job.is_root()) {
      for (std::int64_t i = 0; i < options.prompt_len; ++i) ids.push_back(pick(rng));
    }
    prompts.push_back(bench.engine.prepare_prompt(std::nullopt, ids, false));
  }
  return prompts;
}

// The selected suite prompts as ids, each checked against the context before any weight is read.
Prompts tokenize_suite(const Bench& bench) {
  return launch::tokenize_suite(bench.engine, bench.options.chat, bench.suite, bench.options.gen,
                                "--gen");
}

// ---- Run the matrix ----

// What the runs measured.
struct RunMatrix {
  int n_prompts = 0;
  int ar_runs = 0;  // autoregressive runs planned: one per prompt with --spec, else --reps
  ArSamples samples;
  ArTotals ar;
  std::vector<SpecTotals> specs;       // one per controller x logits mode
  std::vector<PromptRuns> per_prompt;  // prompts whose runs all finished, in prompt order
  int completed_runs = 0;
  int interrupted = 0;  // the stop signal, identical on every rank (it travels with the tokens)
  RunLines lines;
};

std::vector<SpecTotals> speculative_configurations(const Bench& bench) {
  std::vector<SpecTotals> specs;
  if (!bench.speculative()) return specs;
  for (const std::string& kind : bench.spec.controllers) {
    for (LogitsMode mode : bench.spec.logits) {
      for (const std::vector<std::int32_t>& ids : bench.setup->draft_vocab_ids()) {
        specs.push_back({});
        specs.back().controller = kind;
        specs.back().logits = mode;
        specs.back().draft_vocab = static_cast<std::int64_t>(ids.size());
      }
    }
  }
  return specs;
}

// Pages in the weights and sizes the workspaces, then drafts a few tokens with every speculative
// configuration (first-use costs such as recording the draft shapes' CUDA graphs stay out of the
// measured runs). Returns the stop signal, if one came.
int warm_up(const Bench& bench, std::span<const std::int32_t> prompt,
            const std::vector<SpecTotals>& specs, KvCache& kv) {
  GenerationOptions warmup = bench.generation;
  warmup.max_new_tokens = std::min<std::int64_t>(bench.options.gen, 4);
  int signal = decode_autoregressive(bench, prompt, warmup, kv).interrupt_signal;
  warmup.max_new_tokens = std::min<std::int64_t>(bench.options.gen, 8);
  for (const SpecTotals& config : specs) {
    if (signal != 0) break;
    kv.clear();
    const std::unique_ptr<Drafter> drafter = make_drafter(bench);  // not the measured runs'
    signal =
        decode_speculative(bench, config, *drafter, prompt, warmup, kv).result.interrupt_signal;
  }
  return signal;
}

// One prompt's runs, started by its autoregressive run.
PromptRuns start_prompt_runs(std::span<const std::int32_t> prompt, const GenerationResult& ar) {
  PromptRuns runs;
  runs.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  runs.generated_tokens = static_cast<std::int64_t>(ar.tokens.size());
  runs.stopped_on_eos = ar.stopped_on_eos;
  runs.ar.add(ar);
  return runs;
}

void add_autoregressive_run(const Bench& bench, int run, const GenerationResult& result,
                            RunMatrix& matrix, JsonlWriter* jsonl) {
  ++matrix.completed_runs;
  if (jsonl) {
    nlohmann::json record = autoregressive_run_record(run, result.timings, bench.comm().size());
    record.update(bench.prompt_tags(run));
    jsonl->write(record);
  }
  matrix.samples.add(result.timings);
  matrix.ar.add(result);
  matrix.lines.start_run(run, matrix.ar_runs);
  if (!matrix.lines.shown()) return;
  log::info("  {} {}/{}{}: autoregressive prefill {:.1f} tok/s, decode {:.2f} tok/s{}",
            bench.speculative() ? "prompt" : "rep", run + 1, matrix.ar_runs,
            bench.prompt_label(run), matrix.samples.prefill_tps.back(),
            matrix.samples.decode_tps.back(), matrix.lines.hidden_note());
}

// Adds one speculative run to its configuration's totals; returns the run's own totals.
SpecTotals add_speculative_run(const Bench& bench, int run, const SpeculativeRun& spec,
                               const GenerationResult& autoregressive, SpecTotals& totals,
                               RunMatrix& matrix, JsonlWriter* jsonl) {
  ++matrix.completed_runs;
  const bool greedy = bench.sampling.greedy();
  const bool same_tokens = spec.result.tokens == autoregressive.tokens;
  SpecTotals prompt;
  prompt.controller = totals.controller;
  prompt.logits = totals.logits;
  prompt.draft_vocab = totals.draft_vocab;
  prompt.add(spec.result);
  prompt.prompts = 1;
  prompt.lossless_prompts = greedy && same_tokens ? 1 : 0;
  prompt.last_controller_state = spec.controller_state;
  prompt.last_drafter_state = spec.drafter_state;
  totals.add(prompt);
  if (greedy && !same_tokens) {
    log::warn(
        "prompt {}{}: {} / {} / V' {} speculative tokens differ from the autoregressive ones; "
        "greedy self-speculative decoding must be lossless: this is a bug",
        run + 1, bench.prompt_label(run), totals.controller, logits_mode_name(totals.logits),
        draft_vocab_name(totals.draft_vocab));
  }
  if (jsonl) {
    nlohmann::json record = speculative_run_record(
        run, totals, spec.result.timings, spec.result.stats, autoregressive.timings,
        greedy ? std::optional<bool>(same_tokens) : std::nullopt, bench.comm().size());
    record.update(bench.prompt_tags(run));
    if (!spec.drafter_state.is_null()) record["drafter_state"] = spec.drafter_state;
    jsonl->write(record);
  }
  if (!matrix.lines.shown()) return prompt;
  const double tps = spec.result.timings.decode_tokens_per_second();
  log::info("    {:>9} / {:<6} / V' {:<5}: {:.2f} tok/s ({:.2f}x), acceptance {:.3f}, M {:.2f}",
            totals.controller, logits_mode_name(totals.logits),
            draft_vocab_name(totals.draft_vocab), tps,
            ratio(tps, autoregressive.timings.decode_tokens_per_second()),
            spec.result.stats.acceptance_rate(), spec.result.stats.mean_accepted_length());
  if (spec.drafter_state.contains("skip_set")) {
    const nlohmann::json& chosen = spec.drafter_state["skip_set"];
    log::info("      drafter skipped attention {} mlp {}", chosen["attention"].dump(),
              chosen["mlp"].dump());
  }
  return prompt;
}

// Autoregressive decoding of each prompt (or --reps times the one prompt), each followed by every
// speculative configuration on the same prompt. Stops at a stop signal, keeping what finished.
RunMatrix run_matrix(const Bench& bench, const Prompts& prompts, JsonlWriter* jsonl) {
  const BenchOptions& options = bench.options;
  RunMatrix matrix;
  matrix.n_prompts = static_cast<int>(prompts.size());
  matrix.ar_runs = bench.speculative() ? matrix.n_prompts : options.reps;
  matrix.specs = speculative_configurations(bench);
  std::size_t longest = 0;
  for (const std::vector<std::int32_t>& prompt : prompts)
    longest = std::max(longest, prompt.size());
  KvCache kv = bench.engine.model().make_kv_cache(static_cast<std::int64_t>(longest) +
                                                  std::max<std::int64_t>(options.gen, 1));
  matrix.interrupted = warm_up(bench, prompts[0], matrix.specs, kv);
  std::vector<std::unique_ptr<Drafter>> drafters;
  for (std::size_t i = 0; i < matrix.specs.size(); ++i) drafters.push_back(make_drafter(bench));
  for (int run = 0; run < matrix.ar_runs && matrix.interrupted == 0; ++run) {
    const std::vector<std::int32_t>& prompt =
        prompts[static_cast<std::size_t>(bench.speculative() ? run : 0)];
    kv.clear();
    const GenerationResult result = decode_autoregressive(bench, prompt, bench.generation, kv);
    if (result.interrupt_signal != 0) {
      matrix.interrupted = result.interrupt_signal;
      break;
    }
    add_autoregressive_run(bench, run, result, matrix, jsonl);
    PromptRuns prompt_runs = start_prompt_runs(prompt, result);
    for (std::size_t c = 0; c < matrix.specs.size(); ++c) {
      SpecTotals& totals = matrix.specs[c];
      kv.clear();
      const SpeculativeRun spec =
          decode_speculative(bench, totals, *drafters[c], prompt, bench.generation, kv);
      if (spec.result.interrupt_signal != 0) {
        matrix.interrupted = spec.result.interrupt_signal;
        break;
      }
      prompt_runs.specs.push_back(
          add_speculative_run(bench, run, spec, result, totals, matrix, jsonl));
    }
    if (prompt_runs.specs.size() == matrix.specs.size()) {
      matrix.per_prompt.push_back(std::move(prompt_runs));
    }
  }
  return matrix;
}

// ---- Compute ----

// Weight bytes one decode step reads on this rank: all layers, the final norm and the LM head in
// full, but only one row of the embedding table.
std::uint64_t decode_weight_bytes(const LlamaWeights& weights) {
  std::uint64_t bytes = weights.output_matrix().bytes() + weights.final_norm.bytes();
  for (std::size_t l = 0; l < weights.layers.size(); ++l) bytes += weights.layer_bytes(l);
  const Matrix& table = weights.embedding;
  bytes += table.bytes() / static_cast<std::uint64_t>(std::max<std::int64_t>(1, table.rows));
  return bytes;
}

// Bytes per decode token: weights plus the KV cache read by attention (average context), on every
// rank (a collective), at the median ms/token.
DecodeTraffic decode_traffic(const Bench& bench, const ArSamples& samples) {
  const BenchOptions& options = bench.options;
  const ModelConfig& config = bench.engine.config();
  LlamaModel& model = bench.engine.model();
  DecodeTraffic traffic;
  traffic.rank_weight_bytes = decode_weight_bytes(model.weights());
  const double mean_context = static_cast<double>(options.prompt_len) +
                              0.5 * static_cast<double>(std::max<std::int64_t>(options.gen - 1, 0));
  traffic.rank_kv_bytes = 2.0 * static_cast<double>(config.num_layers) *
                          static_cast<double>(model.shard().kv_heads.size()) *
                          static_cast<double>(config.head_dim) *
                          static_cast<double>(dtype_size(model.kv_dtype())) * mean_context;
  std::vector<std::uint64_t> per_rank(static_cast<std::size_t>(bench.comm().size()));
  bench.comm().all_gather_u64(
      traffic.rank_weight_bytes + static_cast<std::uint64_t>(traffic.rank_kv_bytes), per_rank);
  for (std::uint64_t b : per_rank) traffic.all_rank_bytes += static_cast<double>(b);
  traffic.seconds_per_token = median(samples.decode_ms) * 1e-3;
  return traffic;
}

// On a GPU the weights stream from device memory: its bandwidth summed over the ranks (a
// collective). Skipped after a stop signal: every rank knows, so all skip it together.
std::optional<DeviceBandwidthTotals> device_bandwidth(const Bench& bench, int interrupted) {
  if (interrupted != 0) return std::nullopt;
  const std::optional<DeviceBandwidth> measured = bench.engine.backend().measure_device_bandwidth();
  if (!measured) return std::nullopt;
  Communicator& comm = bench.comm();
  std::vector<std::uint64_t> copies(static_cast<std::size_t>(comm.size()));
  std::vector<std::uint64_t> peaks(static_cast<std::size_t>(comm.size()));
  comm.all_gather_u64(static_cast<std::uint64_t>(measured->measured_copy_gbps * 1e3), copies);
  comm.all_gather_u64(static_cast<std::uint64_t>(measured->peak_gbps * 1e3), peaks);
  DeviceBandwidthTotals totals;
  for (std::size_t r = 0; r < copies.size(); ++r) {
    totals.copy_all_gbps += static_cast<double>(copies[r]) * 1e-3;
    totals.peak_all_gbps += static_cast<double>(peaks[r]) * 1e-3;
  }
  return totals;
}

// ---- Report ----

// "q4_k 757 MB + q6_k 354 MB + f32 1 MB": the weights of this rank by format, largest first.
std::string weight_formats_text(const LlamaWeights& weights) {
  const std::map<std::string, std::uint64_t> by_format = weights.bytes_by_format();
  std::vector<std::pair<std::string, std::uint64_t>> sorted(by_format.begin(), by_format.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> parts;
  for (const auto& [format, bytes] : sorted)
    parts.push_back(fmt::format("{} {}", format, human_bytes(bytes)));
  return fmt::format("{}", fmt::join(parts, " + "));
}

// Everything the report shows, measured and computed.
struct BenchResult {
  MemoryBandwidth bandwidth;
  RunMatrix matrix;
  DecodeTraffic traffic;
  std::optional<DeviceBandwidthTotals> device;
  std::vector<SpecFigures> figures;  // one per matrix.specs entry
  std::optional<VerifyCost> verify_cost;
};

// What every bench reports: the model, the machine, how far the runs got, the drafter.
nlohmann::json run_description(const Bench& bench, const RunMatrix& m) {
  const BenchOptions& options = bench.options;
  Engine& engine = bench.engine;
  nlohmann::json out;
  out["model"] = options.engine.model_name();
  out["parameters"] = engine.config().parameter_count();
  out["weight_dtype"] = main_weight_format(engine.model().weights());
  out["weight_bytes_by_format"] = engine.model().weights().bytes_by_format();
  if (engine.backend().host_memory()) {
    const HugePageStatus pages = huge_page_status();
    out["huge_pages"] = {{"thp_mode", pages.mode},
                         {"anon_huge_bytes", pages.anon_huge_bytes},
                         {"known", pages.known}};
  }
  out["tp"] = bench.comm().size();
  out["threads_per_rank"] = num_threads();
  out["isa"] = engine.backend().description().isa;
  if (engine.backend().host_memory()) {
    const kernels::cpu::AmxProbe& amx = kernels::cpu::amx_probe();
    out["amx"] = amx.usable ? std::string("usable") : amx.reason;  // why not, where it is not
  }
  out["backend"] = engine.backend().description().summary();
  out["gen"] = options.gen;
  out["sampling"] = to_json(bench.sampling);
  out["load_s"] = engine.load_seconds();
  out["completed_runs"] = m.completed_runs;
  out["interrupted"] = m.interrupted != 0;
  if (m.interrupted != 0) out["signal"] = stop_signal_name(m.interrupted);
  if (bench.speculative()) {
    out["spec"] = bench.setup->describe();
    out["spec"].erase("controller");
    out["spec"].erase("logits");
  }
  return out;
}

nlohmann::json bench_json(const Bench& bench, const BenchResult& r) {
  const BenchOptions& options = bench.options;
  Engine& engine = bench.engine;
  const RunMatrix& m = r.matrix;
  nlohmann::json out = to_json(r.traffic);
  out.update(run_description(bench, m));
  out["prompt_len"] = options.prompt_len;
  out["prompts"] = m.n_prompts;
  out["reps"] = m.ar_runs;
  out["prefill_tokens_per_s"] = median(m.samples.prefill_tps);
  out["decode_tokens_per_s"] = median(m.samples.decode_tps);
  out["decode_ms_per_token"] = median(m.samples.decode_ms);
  out["measured_bandwidth_gbps"] = to_json(r.bandwidth);
  out["decode_fraction_of_measured_read_bandwidth"] =
      ratio(r.traffic.effective_all_gbps(), r.bandwidth.aggregate_read_gbps);
  if (r.device) {
    // Decode reads the weights from device memory: the fractions that matter on a GPU.
    out["device_bandwidth_gbps"] = to_json(*r.device);
    out["decode_fraction_of_device_copy_bandwidth"] =
        ratio(r.traffic.effective_all_gbps(), r.device->copy_all_gbps);
    out["decode_fraction_of_device_peak_bandwidth"] =
        ratio(r.traffic.effective_all_gbps(), r.device->peak_all_gbps);
    out["cuda_graphs"] = engine.backend().graphs_enabled();
  }
  out["reduction"] = std::string(reduction_order_name(engine.model().reduction_order()));
  out["kv_dtype"] = std::string(dtype_name(engine.model().kv_dtype()));
  // Where the verifier decides, per logits mode: from rows left in device memory, or on the host.
  for (const LogitsMode mode : {LogitsMode::kLocal, LogitsMode::kGather}) {
    out["verification"][std::string(logits_mode_name(mode))] =
        std::string(verification_path(engine.model(), mode));
  }
  if (r.verify_cost) {
    out["verify_cost"] = {{"context", options.prompt_len},
                          {"forward_ms", nlohmann::json::array()},
                          {"v", r.verify_cost->v}};
    for (const double s : r.verify_cost->forward_s)
      out["verify_cost"]["forward_ms"].push_back(1e3 * s);
  }
  // The autoregressive totals (with communication per token) with or without --spec.
  out["autoregressive"] = to_json(m.ar);
  if (bench.speculative()) {
    out["speculative"] = nlohmann::json::array();
    for (std::size_t i = 0; i < m.specs.size(); ++i) {
      out["speculative"].push_back(to_json(m.specs[i], r.figures[i], bench.sampling.greedy()));
    }
  }
  return out;
}

SuiteResults suite_results(const Bench& bench, const RunMatrix& m) {
  return {bench.suite, m.per_prompt, m.specs, bench.sampling.greedy()};
}

// --prompts-file: the run's description, the selection, then the suite's figures and records.
nlohmann::json suite_bench_json(const Bench& bench, const RunMatrix& m) {
  const BenchOptions& options = bench.options;
  nlohmann::json out = run_description(bench, m);
  out["prompts_files"] = options.prompts_files;
  out["split"] = options.selection.split;
  out["tasks"] = tasks_of(bench.suite);
  out["max_prompts_per_task"] = options.selection.max_per_task;
  out["prompts"] = bench.suite.size();
  out["ignore_eos"] = options.ignore_eos;
  out["chat"] = options.chat.chat;
  ControllerOptions controller = bench.spec.controller;
  controller.predictor = bench.setup->predictor();  // for σ_M when it comes from the predictor
  out["controller_options"] = to_json(controller);
  out["autoregressive"] = to_json(m.ar);
  out.update(suite_json(suite_results(bench, m)));
  return out;
}

void print_speed_summary(std::FILE* to, const Bench& bench, const BenchResult& r) {
  Engine& engine = bench.engine;
  const ArSamples& samples = r.matrix.samples;
  const double effective = r.traffic.effective_all_gbps();
  fmt::print(to,
             "bench: {} params ({}), tp {}, {} thread(s)/rank, prompt {}, gen {}\n"
             "  prefill {:.1f} tok/s | decode {:.2f} tok/s = {:.2f} ms/token\n"
             "  decode reads {:.1f} MB/token (all ranks) -> {:.2f} GB/s effective = {:.0f}% of "
             "the measured {:.2f} GB/s streaming read\n",
             engine.config().parameter_count(), weight_formats_text(engine.model().weights()),
             bench.comm().size(), num_threads(), bench.options.prompt_len, bench.options.gen,
             median(samples.prefill_tps), median(samples.decode_tps), median(samples.decode_ms),
             r.traffic.all_rank_bytes / 1e6, effective,
             100.0 * ratio(effective, r.bandwidth.aggregate_read_gbps),
             r.bandwidth.aggregate_read_gbps);
  if (r.device) {
    fmt::print(to,
               "  on {}: {:.0f}% of the measured device copy bandwidth ({:.0f} GB/s), {:.0f}% of "
               "the peak ({:.0f} GB/s); CUDA graphs {}\n",
               engine.backend().description().summary(),
               100.0 * ratio(effective, r.device->copy_all_gbps), r.device->copy_all_gbps,
               100.0 * ratio(effective, r.device->peak_all_gbps), r.device->peak_all_gbps,
               engine.backend().graphs_enabled() ? "on" : "off");
  }
  if (r.verify_cost) {
    std::string line;
    for (std::size_t g = 1; g < r.verify_cost->v.size(); ++g) {
      line += fmt::format("{}{}: {:.3f}", g == 1 ? "" : ", ", g, r.verify_cost->v[g]);
    }
    fmt::print(
        to, "  verification cost v(gamma) = t(gamma + 1 tokens) / t(1 token), at context {}: {}\n",
        bench.options.prompt_len, line);
  }
}

void print_speculative_table(std::FILE* to, const Bench& bench, const BenchResult& r) {
  const RunMatrix& m = r.matrix;
  fmt::print(to,
             "  self-speculative vs autoregressive ({:.2f} tok/s), {} prompts, skip set {}:\n"
             "  {:>9} {:>6} {:>6} {:>8} {:>8} {:>6} {:>5} {:>6} {:>7} {:>8} {:>10} {:>8}\n",
             m.ar.tokens_per_second(), m.n_prompts, bench.skip_summary(), "controller", "logits",
             "V'", "tok/s", "speedup", "alpha", "M", "c", "verify/c", "expected", "efficiency",
             "lossless");
  for (std::size_t i = 0; i < m.specs.size(); ++i) {
    const SpecTotals& t = m.specs[i];
    const SpecFigures& f = r.figures[i];
    const std::string lossless =
        bench.sampling.greedy() ? fmt::format("{}/{}", t.lossless_prompts, t.prompts) : "n/a";
    fmt::print(to,
               "  {:>9} {:>6} {:>6} {:>8.2f} {:>7.2f}x {:>6.3f} {:>5.2f} {:>6.3f} {:>7.2f} "
               "{:>7.2f}x {:>10.2f} {:>8}\n",
               t.controller, logits_mode_name(t.logits), draft_vocab_name(t.draft_vocab),
               t.tokens_per_second(), f.speedup, f.acceptance_rate, f.mean_accepted_length,
               f.cost_ratio, f.verify_cost_ratio, f.expected_speedup, f.efficiency, lossless);
  }
}

// --prompts-file: what was run, before the tables.
void print_suite_header(std::FILE* to, const Bench& bench, const RunMatrix& m) {
  const BenchOptions& options = bench.options;
  std::string tasks;
  for (const std::string& task : tasks_of(bench.suite)) {
    const auto count = std::count_if(bench.suite.begin(), bench.suite.end(),
                                     [&](const SuitePrompt& p) { return p.task == task; });
    tasks += fmt::format("{}{} {}", tasks.empty() ? "" : ", ", task, count);
  }
  fmt::print(to,
             "bench: {} {} prompt(s) ({}), up to {} new tokens each{}, tp {}, {} thread(s)/rank\n"
             "  self-speculative vs autoregressive ({:.2f} tok/s over all prompts), skip set "
             "{}, max draft {}\n",
             bench.suite.size(), options.selection.split, tasks, options.gen,
             options.ignore_eos ? "" : " (stopping at end of sequence)", bench.comm().size(),
             num_threads(), m.ar.tokens_per_second(), bench.skip_summary(),
             bench.spec.controller.max_draft);
}

// Rank 0: the JSON object on stdout (--json) and in --out, the summary record (--out-jsonl).
void write_json(const BenchOptions& options, const nlohmann::json& out, JsonlWriter* jsonl) {
  if (options.output.json) print_json_line(out);
  if (jsonl) {
    nlohmann::json summary = out;
    summary["record"] = "summary";
    jsonl->write(summary);
  }
  if (!options.out.empty()) {
    std::ofstream file(options.out);
    SELFSPEC_CHECK(file.good(), "--out {}: cannot open for writing", options.out);
    file << out.dump(2) << "\n";
  }
}

// Rank 0: the summary tables (stdout, or stderr with --json), then the JSON.
void report(const Bench& bench, const BenchResult& r, int status, JsonlWriter* jsonl) {
  const BenchOptions& options = bench.options;
  if (r.matrix.interrupted != 0) {
    log::warn(
        "stopped by {} after {} completed run(s): the summary covers those; exiting with "
        "status {}",
        stop_signal_name(r.matrix.interrupted), r.matrix.completed_runs, status);
  }
  std::FILE* table = options.output.json ? stderr : stdout;
  if (options.suite()) {
    print_suite_header(table, bench, r.matrix);
    print_suite_tables(table, suite_results(bench, r.matrix));
  } else {
    print_speed_summary(table, bench, r);
    if (bench.speculative()) print_speculative_table(table, bench, r);
  }
  std::fflush(table);
  write_json(options, options.suite() ? suite_bench_json(bench, r.matrix) : bench_json(bench, r),
             jsonl);
}

// ---- The command ----

// Checks the options against the model and picks the prompts' source, before any weight is read:
// random ids of --prompt-len, or the suite's selection.
void prepare(Bench& bench) {
  const BenchOptions& options = bench.options;
  if (options.suite()) {
    SELFSPEC_CHECK(bench.speculative(),
                   "--prompts-file compares autoregressive with self-speculative decoding: give "
                   "--spec layer-skip and a skip set, --spec swift or --spec asd");
    bench.suite = select_prompts(read_prompt_suite(options.prompts_files), options.selection);
  } else {
    SELFSPEC_CHECK(options.prompt_len >= 1, "--prompt-len must be >= 1");
    bench.engine.check_context(options.prompt_len, options.gen);
  }
  bench.setup.emplace(bench.spec, bench.engine, options.spec.kinds());
  bench.sampling = options.sampling.params();
}

// What every measured run generates: --gen tokens. Random prompts ignore end-of-sequence ids (the
// length is the measurement); suite prompts stop at one, as the model would, unless --ignore-eos.
GenerationOptions generation_options(const Bench& bench) {
  const BenchOptions& options = bench.options;
  GenerationOptions generation;
  generation.max_new_tokens = options.gen;
  generation.ignore_eos = !options.suite() || options.ignore_eos;
  if (options.suite()) generation.eos_ids = bench.engine.eos_ids();
  generation.sampling = bench.sampling;
  generation.logits = bench.spec.logits.front();
  generation.interrupt = pending_stop_signal;
  return generation;
}

int run_bench(const BenchOptions& options) {
  return run_job(options.engine.threads, [&](Job& job) {
    const SpeculativeConfig spec = options.spec.config();
    EngineOptions engine_options = options.engine.engine_options();
    engine_options.quantized_draft_weights = spec.quantized_draft_weights();
    Engine engine(engine_options, job.comm());
    Bench bench{options, job, engine, spec, std::nullopt, {}, {}, {}};
    prepare(bench);
    bench.generation = generation_options(bench);
    BenchResult result;
    Prompts prompts;
    if (options.suite()) {
      prompts = tokenize_suite(bench);
    } else {
      result.bandwidth = measure_bandwidth(job.comm(), options);
    }
    engine.load();
    bench.setup->attach(engine);
    if (!options.suite()) prompts = random_prompts(bench);
    const std::unique_ptr<JsonlWriter> jsonl = options.output.open_jsonl(job.is_root());

    result.matrix = run_matrix(bench, prompts, jsonl.get());
    if (!options.suite()) {
      result.traffic = decode_traffic(bench, result.matrix.samples);
      result.device = device_bandwidth(bench, result.matrix.interrupted);
      if (options.verify_cost_rounds > 0 && result.matrix.interrupted == 0) {
        VerifyCostOptions cost;
        cost.context = options.prompt_len;
        cost.max_draft = options.verify_cost_max;
        cost.rounds = options.verify_cost_rounds;
        result.verify_cost = measure_verify_cost(engine.model(), cost);
      }
    }
    for (const SpecTotals& totals : result.matrix.specs) {
      result.figures.push_back(compare_with_autoregressive(totals, result.matrix.ar));
    }
    const int interrupted = result.matrix.interrupted;
    const int status = interrupted != 0 ? stop_exit_code(interrupted) : 0;
    if (job.is_root()) report(bench, result, status, jsonl.get());
    return status;
  });
}

// --prompts-file and the options that shape the selection (they need it). Returns --prompts-file.
CLI::Option* add_prompt_suite_options(CLI::App& command, BenchOptions& options) {
  CLI::Option* file =
      command
          .add_option("--prompts-file", options.prompts_files,
                      "real-text prompts instead of random ids: JSON Lines files (id, task, "
                      "split, prompt; bench/prompts/README.md), comma-separated; needs --spec. "
                      "Reports medians per task and overall")
          ->check(CLI::ExistingFile)
          ->delimiter(',');
  command
      .add_option("--split", options.selection.split,
                  "suite prompts to run: evaluation (reported), calibration (for tuning) or all")
      ->check(CLI::IsMember(kPromptSplitChoices))
      ->capture_default_str()
      ->needs(file);
  command
      .add_option("--tasks", options.selection.tasks,
                  "only the suite prompts of these tasks (comma-separated)")
      ->check(CLI::IsMember(known_prompt_tasks()))
      ->delimiter(',')
      ->needs(file);
  command
      .add_option("--max-prompts-per-task", options.selection.max_per_task,
                  "at most this many suite prompts of each task (the first in file order)")
      ->check(CLI::PositiveNumber)
      ->needs(file);
  command.add_flag("--ignore-eos", options.ignore_eos,
                   "suite prompts: always generate --gen tokens instead of stopping at the end of "
                   "sequence (random prompts always do: there it changes nothing, so a run config "
                   "that sets it for `generate` also serves `bench`)");
  options.chat.add_to(command, "each suite prompt")->needs(file);
  return file;
}

}  // namespace

void add_bench_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* command = app.add_subcommand(
      "bench",
      "decode speed vs measured memory bandwidth; with --spec, self-speculative vs "
      "autoregressive side by side (speedup, α, M, c, expected speedup, efficiency), on random "
      "prompts or, with --prompts-file, real-text prompts with medians per task");
  options->engine.add_to(*command);
  CLI::Option* prompt_len =
      command->add_option("--prompt-len", options->prompt_len, "prompt tokens (random ids)")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
  command->add_option("--gen", options->gen, "tokens to generate per run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI::Option* reps =
      command->add_option("--reps", options->reps, "autoregressive repetitions without --spec")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
  CLI::Option* prompts =
      command->add_option("--prompts", options->prompts, "random prompts compared with --spec")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
  command
      ->add_option("--verify-cost-rounds", options->verify_cost_rounds,
                   "random prompts: interleaved rounds timing v(gamma), a forward over gamma + 1 "
                   "tokens against a one-token forward, at the prompt length (0: skip)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      ->add_option("--verify-cost-max", options->verify_cost_max, "the largest gamma of v(gamma)")
      ->check(CLI::Range(1, kMaxDraftTokens))
      ->capture_default_str();
  add_prompt_suite_options(*command, *options)
      ->excludes(prompt_len)
      ->excludes(reps)
      ->excludes(prompts);
  options->sampling.add_to(*command, "seed of the prompts and of sampling");
  command
      ->add_option("--bandwidth-mb", options->bandwidth_mb,
                   "buffer per rank for the bandwidth measurement (0: 4x last-level cache)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--out", options->out, "also write the JSON result to this file");
  options->output.add_to(*command, "the summary table (which then goes to stderr)",
                         "one record per finished run, then the summary,");
  options->spec.add_to(*command, /*lists=*/true);
  command->callback([options, &run] { run = [options] { return run_bench(*options); }; });
}

}  // namespace selfspec::launch
