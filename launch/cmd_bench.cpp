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
// Summary on stderr, one JSON object on stdout (and in --out).
#include "backend/memory_bandwidth.hpp"
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
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <memory>

namespace selfspec::launch {
namespace {

struct BenchOptions {
  EngineCliOptions engine;
  std::int64_t prompt_len = 128;
  std::int64_t gen = 64;
  int reps = 3;
  int prompts = 4;
  std::uint64_t seed = 0;
  double temperature = 0.0;
  std::int32_t top_k = 0;
  double top_p = 1.0;
  double bandwidth_mb = 0.0;
  std::string out;
  std::string out_jsonl;
  bool json = false;
  SpecCliOptions spec;
};

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

double ratio(double a, double b) {
  return b > 0.0 ? a / b : 0.0;
}

// Weight bytes one decode step reads on this rank: all layers, the final norm and the LM head in
// full, but only one row of the embedding table.
std::uint64_t decode_weight_bytes(const LlamaWeights& weights) {
  std::uint64_t bytes = weights.output_matrix().bytes() + weights.final_norm.bytes();
  for (std::size_t l = 0; l < weights.layers.size(); ++l) bytes += weights.layer_bytes(l);
  const Matrix& table = weights.embedding;
  bytes += static_cast<std::uint64_t>(table.cols) * dtype_size(table.dtype);
  return bytes;
}

// Totals of autoregressive runs.
struct ArTotals {
  std::int64_t tokens = 0;  // decoded after the first token
  double seconds = 0.0;
  std::int64_t forwards = 0;
  double forward_seconds = 0.0;
  double tokens_per_second() const { return ratio(static_cast<double>(tokens), seconds); }
  double seconds_per_forward() const {
    return ratio(forward_seconds, static_cast<double>(forwards));
  }
};

// Totals of one speculative configuration over all prompts.
struct SpecTotals {
  std::string controller;
  LogitsMode logits = LogitsMode::kLocal;
  std::int64_t tokens = 0;
  double seconds = 0.0;
  DecodingStats stats;
  int lossless_prompts = 0;
  int prompts = 0;
  nlohmann::json last_controller_state;

  void add(const GenerationResult& r) {
    tokens += r.timings.decode_forwards;
    seconds += r.timings.decode_seconds;
    DecodingStats& s = stats;
    s.rounds += r.stats.rounds;
    s.drafted += r.stats.drafted;
    s.accepted += r.stats.accepted;
    s.draft_forwards += r.stats.draft_forwards;
    s.verify_forwards += r.stats.verify_forwards;
    s.round_tokens += r.stats.round_tokens;
    s.draft_forward_s += r.stats.draft_forward_s;
    s.verify_forward_s += r.stats.verify_forward_s;
    s.phases.draft_s += r.stats.phases.draft_s;
    s.phases.verify_s += r.stats.phases.verify_s;
    s.phases.control_s += r.stats.phases.control_s;
    s.phases.comm_s += r.stats.phases.comm_s;
  }
  double tokens_per_second() const { return ratio(static_cast<double>(tokens), seconds); }
};

int run_bench(const BenchOptions& options, const CLI::App& command) {
  return run_job(options.engine.threads, [&](Job& job) {
    Communicator& comm = job.comm();
    Engine engine(options.engine.engine_options(), comm);
    SELFSPEC_CHECK(options.prompt_len >= 1, "--prompt-len must be >= 1");
    engine.check_context(options.prompt_len, options.gen);
    options.spec.validate(command);
    const int num_layers = static_cast<int>(engine.config().num_layers);
    std::optional<SkipSet> skips;
    if (options.spec.enabled()) skips = options.spec.skip_set(command, num_layers);
    SamplingParams sampling{options.temperature, options.top_k, options.top_p, options.seed};
    sampling.validate();

    log::info("measuring memory bandwidth ({} rank(s) x {} thread(s))", comm.size(), num_threads());
    const MemoryBandwidth bandwidth =
        measure_memory_bandwidth(comm, static_cast<std::uint64_t>(options.bandwidth_mb * 1e6));
    log::info("  read {:.1f} GB/s per rank, {:.1f} GB/s all ranks; copy {:.1f} GB/s all ranks",
              bandwidth.read_gbps, bandwidth.aggregate_read_gbps, bandwidth.aggregate_copy_gbps);

    engine.load();
    LlamaModel& model = engine.model();
    const ModelConfig& config = engine.config();

    // Seeded random prompts (ids >= 3 avoid the usual special tokens), made on rank 0.
    const int n_prompts = options.spec.enabled() ? options.prompts : 1;
    std::vector<std::vector<std::int32_t>> prompts;
    {
      boost::random::mt19937_64 rng(options.seed);
      boost::random::uniform_int_distribution<std::int32_t> pick(
          std::min<std::int32_t>(3, static_cast<std::int32_t>(config.vocab_size) - 1),
          static_cast<std::int32_t>(config.vocab_size) - 1);
      for (int p = 0; p < n_prompts; ++p) {
        std::vector<std::int32_t> ids;
        if (job.is_root()) {
          for (std::int64_t i = 0; i < options.prompt_len; ++i) ids.push_back(pick(rng));
        }
        prompts.push_back(engine.prepare_prompt(std::nullopt, ids, false));
      }
    }

    GenerationOptions generation;
    generation.max_new_tokens = options.gen;
    generation.ignore_eos = true;
    generation.sampling = sampling;
    generation.logits = options.spec.logits_modes().front();
    generation.interrupt = pending_stop_signal;
    // One record per finished run, written as it finishes (rank 0).
    std::unique_ptr<JsonlWriter> jsonl;
    if (job.is_root() && !options.out_jsonl.empty()) {
      jsonl = std::make_unique<JsonlWriter>(options.out_jsonl);
    }
    const auto record = [&](nlohmann::json entry) {
      if (jsonl) jsonl->write(entry);
    };
    int interrupted = 0;  // the stop signal, identical on every rank (it travels with the tokens)
    int completed_runs = 0;
    KvCache kv = model.make_kv_cache(options.prompt_len + std::max<std::int64_t>(options.gen, 1));
    Decoder plain(model, comm);

    // Warm-up: page in the weights, size the workspaces.
    {
      GenerationOptions warmup = generation;
      warmup.max_new_tokens = std::min<std::int64_t>(options.gen, 4);
      interrupted = plain.generate(prompts[0], warmup, kv).interrupt_signal;
    }

    std::vector<double> prefill_tps, decode_tps, decode_ms;
    ArTotals ar;
    std::vector<SpecTotals> specs;
    if (skips) {
      for (const std::string& kind : options.spec.controller_kinds()) {
        for (LogitsMode mode : options.spec.logits_modes()) {
          specs.push_back({});
          specs.back().controller = kind;
          specs.back().logits = mode;
        }
      }
    }
    const int ar_runs = skips ? n_prompts : options.reps;
    for (int run = 0; run < ar_runs && interrupted == 0; ++run) {
      const std::vector<std::int32_t>& prompt = prompts[static_cast<std::size_t>(skips ? run : 0)];
      kv.clear();
      const GenerationResult result = plain.generate(prompt, generation, kv);
      if (result.interrupt_signal != 0) {
        interrupted = result.interrupt_signal;
        break;
      }
      ++completed_runs;
      record({{"record", "run"},
              {"method", "autoregressive"},
              {"run", run},
              {"prefill_tokens_per_s", result.timings.prefill_tokens_per_second()},
              {"decode_tokens_per_s", result.timings.decode_tokens_per_second()},
              {"decode_tokens", result.timings.decode_forwards},
              {"tp", comm.size()}});
      prefill_tps.push_back(result.timings.prefill_tokens_per_second());
      decode_tps.push_back(result.timings.decode_tokens_per_second());
      decode_ms.push_back(ratio(1e3 * result.timings.decode_seconds,
                                static_cast<double>(result.timings.decode_forwards)));
      ar.tokens += result.timings.decode_forwards;
      ar.seconds += result.timings.decode_seconds;
      ar.forwards += result.timings.decode_forwards;
      ar.forward_seconds += result.stats.verify_forward_s;
      log::info("  {} {}/{}: autoregressive prefill {:.1f} tok/s, decode {:.2f} tok/s",
                skips ? "prompt" : "rep", run + 1, ar_runs, prefill_tps.back(), decode_tps.back());
      // The same prompt through every speculative configuration, right after.
      for (SpecTotals& totals : specs) {
        LayerSkipDrafter drafter(skips->plan(num_layers), skips->name);
        ControllerOptions controller_options = options.spec.controller;
        controller_options.kind = totals.controller;
        controller_options.seed = options.seed ^ 0x7468656d70736f6eull;
        const auto controller = make_draft_length_controller(controller_options);
        GenerationOptions spec = generation;
        spec.logits = totals.logits;
        spec.debug_sync = options.spec.debug_sync;
        Decoder decoder(model, comm, drafter, *controller);
        kv.clear();
        const GenerationResult r = decoder.generate(prompt, spec, kv);
        if (r.interrupt_signal != 0) {
          interrupted = r.interrupt_signal;
          break;
        }
        ++completed_runs;
        totals.add(r);
        ++totals.prompts;
        if (sampling.greedy() && r.tokens == result.tokens) ++totals.lossless_prompts;
        totals.last_controller_state = controller->state();
        record({{"record", "run"},
                {"method", "self-speculative"},
                {"run", run},
                {"controller", totals.controller},
                {"logits", logits_mode_name(totals.logits)},
                {"decode_tokens_per_s", r.timings.decode_tokens_per_second()},
                {"speedup", ratio(r.timings.decode_tokens_per_second(),
                                  result.timings.decode_tokens_per_second())},
                {"acceptance_rate", r.stats.acceptance_rate()},
                {"mean_accepted_length", r.stats.mean_accepted_length()},
                {"lossless", sampling.greedy() ? nlohmann::json(r.tokens == result.tokens)
                                               : nlohmann::json(nullptr)},
                {"tp", comm.size()}});
        log::info(
            "    {:>9} / {:<6}: {:.2f} tok/s ({:.2f}x), acceptance {:.3f}, M {:.2f}",
            totals.controller, logits_mode_name(totals.logits),
            r.timings.decode_tokens_per_second(),
            ratio(r.timings.decode_tokens_per_second(), result.timings.decode_tokens_per_second()),
            r.stats.acceptance_rate(), r.stats.mean_accepted_length());
      }
    }

    // Bytes per decode token: weights plus the KV cache read by attention (average context).
    const std::uint64_t weight_bytes = decode_weight_bytes(model.weights());
    const double mean_context =
        static_cast<double>(options.prompt_len) +
        0.5 * static_cast<double>(std::max<std::int64_t>(options.gen - 1, 0));
    const double kv_bytes = 2.0 * static_cast<double>(config.num_layers) *
                            static_cast<double>(model.shard().kv_heads.size()) *
                            static_cast<double>(config.head_dim) * sizeof(float) * mean_context;
    std::vector<std::uint64_t> per_rank(static_cast<std::size_t>(comm.size()));
    comm.all_gather_u64(weight_bytes + static_cast<std::uint64_t>(kv_bytes), per_rank);
    double all_rank_bytes = 0.0;
    for (std::uint64_t b : per_rank) all_rank_bytes += static_cast<double>(b);
    const double seconds_per_token = median(decode_ms) * 1e-3;
    const double effective_rank_gbps =
        ratio(static_cast<double>(weight_bytes) + kv_bytes, seconds_per_token) * 1e-9;
    const double effective_all_gbps = ratio(all_rank_bytes, seconds_per_token) * 1e-9;
    const double fraction = ratio(effective_all_gbps, bandwidth.aggregate_read_gbps);
    // On a GPU the weights stream from device memory: report decode against it too (all ranks).
    // (Skipped after a stop signal: every rank knows, so all skip it together.)
    std::optional<DeviceBandwidth> device_bandwidth;
    if (interrupted == 0) device_bandwidth = engine.backend().measure_device_bandwidth();
    double device_copy_all = 0.0;
    double device_peak_all = 0.0;
    if (device_bandwidth) {
      std::vector<std::uint64_t> copies(static_cast<std::size_t>(comm.size()));
      std::vector<std::uint64_t> peaks(static_cast<std::size_t>(comm.size()));
      comm.all_gather_u64(static_cast<std::uint64_t>(device_bandwidth->measured_copy_gbps * 1e3),
                          copies);
      comm.all_gather_u64(static_cast<std::uint64_t>(device_bandwidth->peak_gbps * 1e3), peaks);
      for (std::size_t r = 0; r < copies.size(); ++r) {
        device_copy_all += static_cast<double>(copies[r]) * 1e-3;
        device_peak_all += static_cast<double>(peaks[r]) * 1e-3;
      }
    }
    const int status = interrupted != 0 ? stop_exit_code(interrupted) : 0;
    if (!job.is_root()) return status;

    nlohmann::json out;
    out["model"] = options.engine.model_name();
    out["parameters"] = config.parameter_count();
    out["weight_dtype"] = dtype_name(model.weights().embedding.dtype);
    out["tp"] = comm.size();
    out["threads_per_rank"] = num_threads();
    out["isa"] = engine.backend().description().isa;
    out["backend"] = engine.backend().description().summary();
    out["prompt_len"] = options.prompt_len;
    out["gen"] = options.gen;
    out["prompts"] = n_prompts;
    out["reps"] = ar_runs;
    out["sampling"] = {{"temperature", sampling.temperature},
                       {"top_k", sampling.top_k},
                       {"top_p", sampling.top_p},
                       {"seed", sampling.seed}};
    out["prefill_tokens_per_s"] = median(prefill_tps);
    out["decode_tokens_per_s"] = median(decode_tps);
    out["decode_ms_per_token"] = median(decode_ms);
    out["bytes_per_decode_token"] = {{"rank0_weights", weight_bytes},
                                     {"rank0_kv_cache", kv_bytes},
                                     {"all_ranks", all_rank_bytes}};
    out["effective_bandwidth_gbps"] = {{"rank0", effective_rank_gbps},
                                       {"all_ranks", effective_all_gbps}};
    out["measured_bandwidth_gbps"] = {{"read_per_rank", bandwidth.read_gbps},
                                      {"read_all_ranks", bandwidth.aggregate_read_gbps},
                                      {"copy_all_ranks", bandwidth.aggregate_copy_gbps},
                                      {"buffer_bytes_per_rank", bandwidth.buffer_bytes}};
    out["decode_fraction_of_measured_read_bandwidth"] = fraction;
    if (device_bandwidth) {
      // Decode reads the weights from device memory: the fractions that matter on a GPU.
      out["device_bandwidth_gbps"] = {{"measured_copy_all_ranks", device_copy_all},
                                      {"peak_all_ranks", device_peak_all}};
      out["decode_fraction_of_device_copy_bandwidth"] = ratio(effective_all_gbps, device_copy_all);
      out["decode_fraction_of_device_peak_bandwidth"] = ratio(effective_all_gbps, device_peak_all);
      out["cuda_graphs"] = engine.backend().graphs_enabled();
    }
    out["load_s"] = engine.load_seconds();
    out["completed_runs"] = completed_runs;
    out["interrupted"] = interrupted != 0;
    if (interrupted != 0) {
      out["signal"] = stop_signal_name(interrupted);
      log::warn(
          "stopped by {} after {} completed run(s): the summary covers those; exiting with "
          "status {}",
          stop_signal_name(interrupted), completed_runs, status);
    }

    fmt::print(stderr,
               "bench: {} params ({}), tp {}, {} thread(s)/rank, prompt {}, gen {}\n"
               "  prefill {:.1f} tok/s | decode {:.2f} tok/s = {:.2f} ms/token\n"
               "  decode reads {:.1f} MB/token (all ranks) -> {:.2f} GB/s effective = {:.0f}% of "
               "the measured {:.2f} GB/s streaming read\n",
               config.parameter_count(), dtype_name(model.weights().embedding.dtype), comm.size(),
               num_threads(), options.prompt_len, options.gen, median(prefill_tps),
               median(decode_tps), median(decode_ms), all_rank_bytes / 1e6, effective_all_gbps,
               100.0 * fraction, bandwidth.aggregate_read_gbps);
    if (device_bandwidth) {
      fmt::print(stderr,
                 "  on {}: {:.0f}% of the measured device copy bandwidth ({:.0f} GB/s), {:.0f}% of "
                 "the peak ({:.0f} GB/s); CUDA graphs {}\n",
                 engine.backend().description().summary(),
                 100.0 * ratio(effective_all_gbps, device_copy_all), device_copy_all,
                 100.0 * ratio(effective_all_gbps, device_peak_all), device_peak_all,
                 engine.backend().graphs_enabled() ? "on" : "off");
    }

    if (skips) {
      nlohmann::json configs = nlohmann::json::array();
      const double ar_tps = ar.tokens_per_second();
      const double ar_forward = ar.seconds_per_forward();
      fmt::print(stderr,
                 "  self-speculative vs autoregressive ({:.2f} tok/s), {} prompts, skip set '{}' "
                 "({} of {} sublayers):\n"
                 "  {:>9} {:>6} {:>8} {:>8} {:>6} {:>5} {:>6} {:>7} {:>8} {:>10} {:>8}\n",
                 ar_tps, n_prompts, skips->name, skips->plan(num_layers).skipped_count(),
                 2 * num_layers, "controller", "logits", "tok/s", "speedup", "alpha", "M", "c",
                 "verify/c", "expected", "efficiency", "lossless");
      for (const SpecTotals& t : specs) {
        const DecodingStats& s = t.stats;
        const double speedup = ratio(t.tokens_per_second(), ar_tps);
        const double alpha = s.acceptance_rate();
        const double m = s.mean_accepted_length();
        const double c =
            ratio(ratio(s.draft_forward_s, static_cast<double>(s.draft_forwards)), ar_forward);
        const double verify_cost =
            ratio(ratio(s.verify_forward_s, static_cast<double>(s.verify_forwards)), ar_forward);
        const double expected = ratio(m * alpha, (m - 1.0) * c + alpha);
        const double efficiency = ratio(speedup, expected);
        const std::string lossless =
            sampling.greedy() ? fmt::format("{}/{}", t.lossless_prompts, t.prompts) : "n/a";
        fmt::print(stderr,
                   "  {:>9} {:>6} {:>8.2f} {:>7.2f}x {:>6.3f} {:>5.2f} {:>6.3f} {:>7.2f} {:>7.2f}x "
                   "{:>10.2f} {:>8}\n",
                   t.controller, logits_mode_name(t.logits), t.tokens_per_second(), speedup, alpha,
                   m, c, verify_cost, expected, efficiency, lossless);
        nlohmann::json entry = {{"controller", t.controller},
                                {"logits", logits_mode_name(t.logits)},
                                {"decode_tokens_per_s", t.tokens_per_second()},
                                {"speedup", speedup},
                                {"acceptance_rate", alpha},
                                {"mean_accepted_length", m},
                                {"cost_ratio_c", c},
                                {"verify_cost_ratio", verify_cost},
                                {"expected_speedup_eq6", expected},
                                {"efficiency", efficiency},
                                {"drafted", s.drafted},
                                {"accepted", s.accepted},
                                {"draft_forwards", s.draft_forwards},
                                {"verify_forwards", s.verify_forwards},
                                {"phases_s",
                                 {{"draft", s.phases.draft_s},
                                  {"verify", s.phases.verify_s},
                                  {"control", s.phases.control_s},
                                  {"comm", s.phases.comm_s}}},
                                {"controller_state_last_prompt", t.last_controller_state}};
        if (sampling.greedy()) {
          entry["lossless_prompts"] = t.lossless_prompts;
          entry["lossless"] = t.lossless_prompts == t.prompts;
        }
        configs.push_back(entry);
      }
      out["autoregressive"] = {
          {"decode_tokens_per_s", ar_tps}, {"forward_ms", ar_forward * 1e3}, {"tokens", ar.tokens}};
      out["spec"] = options.spec.describe(*skips, num_layers);
      out["spec"].erase("controller");
      out["spec"].erase("logits");
      out["speculative"] = configs;
    }

    fmt::print("{}\n", out.dump());
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
    return status;
  });
}

}  // namespace

void add_bench_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* command = app.add_subcommand(
      "bench",
      "decode speed vs measured memory bandwidth; with --spec, self-speculative vs "
      "autoregressive side by side (speedup, α, M, c, expected speedup, efficiency)");
  options->engine.add_to(*command);
  command->add_option("--prompt-len", options->prompt_len, "prompt tokens (random ids)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--gen", options->gen, "tokens to generate per run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--reps", options->reps, "autoregressive repetitions without --spec")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--prompts", options->prompts, "prompts compared with --spec")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--seed", options->seed, "seed of the prompts and of sampling")
      ->capture_default_str();
  command->add_option("--temperature", options->temperature, "0 = greedy")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--top-k", options->top_k, "top-k for sampling (0 = off)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--top-p", options->top_p, "top-p for sampling (1 = off)")
      ->check(CLI::Range(0.0, 1.0));
  command
      ->add_option("--bandwidth-mb", options->bandwidth_mb,
                   "buffer per rank for the bandwidth measurement (0: 4x last-level cache)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--out", options->out, "also write the JSON result to this file");
  command->add_option("--out-jsonl", options->out_jsonl,
                      "append one JSON line per finished run, then the summary, to this file "
                      "(flushed as written: a preempted job keeps its finished runs)");
  command->add_flag("--json", options->json, "(the JSON line is always printed on stdout)");
  options->spec.add_to(*command, /*lists=*/true);
  command->callback([options, command, &run] {
    run = [options, command] { return run_bench(*options, *command); };
  });
}

}  // namespace selfspec::launch
