// `selfspec bench`: end-to-end speed of one model on this machine, with the machine's own memory
// bandwidth measured in the same run so decode is reported as a fraction of a measured peak.
//   prefill tokens/s, decode ms/token and tokens/s (median over repetitions),
//   bytes read per decode token (weights + KV cache, per rank and all ranks),
//   effective bandwidth = bytes per token / time per token, and its fraction of the measured
//   streaming-read bandwidth (all ranks streaming at once).
// Prints a summary on stderr and one JSON object on stdout (and to --out FILE).
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "decode/generator.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "runtime/engine.hpp"
#include "runtime/memory_bandwidth.hpp"

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
  std::uint64_t seed = 0;
  double bandwidth_mb = 0.0;
  std::string out;
  bool json = false;
};

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// Weight bytes one decode step reads on this rank: all layers, the final norm and the LM head in
// full, but only one row of the embedding table.
std::uint64_t decode_weight_bytes(const LlamaWeights& weights) {
  std::uint64_t bytes = weights.output_matrix().bytes() + weights.final_norm.size() * sizeof(float);
  for (std::size_t l = 0; l < weights.layers.size(); ++l) bytes += weights.layer_bytes(l);
  const Matrix& table = weights.embedding;
  bytes += static_cast<std::uint64_t>(table.cols) * dtype_size(table.dtype);
  return bytes;
}

int run_bench(const BenchOptions& options) {
  return run_job(options.engine.threads, [&](Job& job) {
    Communicator& comm = job.comm();
    Engine engine(options.engine.engine_options(), comm);
    SELFSPEC_CHECK(options.prompt_len >= 1, "--prompt-len must be >= 1");
    engine.check_context(options.prompt_len, options.gen);

    log::info("measuring memory bandwidth ({} rank(s) x {} thread(s))", comm.size(), num_threads());
    const MemoryBandwidth bandwidth =
        measure_memory_bandwidth(comm, static_cast<std::uint64_t>(options.bandwidth_mb * 1e6));
    log::info("  read {:.1f} GB/s per rank, {:.1f} GB/s all ranks; copy {:.1f} GB/s all ranks",
              bandwidth.read_gbps, bandwidth.aggregate_read_gbps, bandwidth.aggregate_copy_gbps);

    engine.load();
    LlamaModel& model = engine.model();
    const ModelConfig& config = engine.config();

    // A seeded random prompt (ids >= 3 avoid the usual special tokens), made on rank 0.
    std::vector<std::int32_t> ids;
    if (job.is_root()) {
      boost::random::mt19937_64 rng(options.seed);
      boost::random::uniform_int_distribution<std::int32_t> pick(
          std::min<std::int32_t>(3, static_cast<std::int32_t>(config.vocab_size) - 1),
          static_cast<std::int32_t>(config.vocab_size) - 1);
      for (std::int64_t i = 0; i < options.prompt_len; ++i) ids.push_back(pick(rng));
    }
    const std::vector<std::int32_t> prompt = engine.prepare_prompt(std::nullopt, ids, false);

    GenerationOptions generation;
    generation.max_new_tokens = options.gen;
    generation.ignore_eos = true;
    KvCache kv = model.make_kv_cache(options.prompt_len + std::max<std::int64_t>(options.gen, 1));
    Generator generator(model, comm);

    // Warm-up: page in the weights, size the workspaces.
    {
      GenerationOptions warmup = generation;
      warmup.max_new_tokens = std::min<std::int64_t>(options.gen, 4);
      generator.generate(prompt, warmup, kv);
      kv.clear();
    }
    std::vector<double> prefill_tps, decode_tps, decode_ms, comm_s;
    for (int rep = 0; rep < options.reps; ++rep) {
      kv.clear();
      const GenerationResult result = generator.generate(prompt, generation, kv);
      prefill_tps.push_back(result.timings.prefill_tokens_per_second());
      decode_tps.push_back(result.timings.decode_tokens_per_second());
      decode_ms.push_back(result.timings.decode_forwards > 0
                              ? 1e3 * result.timings.decode_seconds /
                                    static_cast<double>(result.timings.decode_forwards)
                              : 0.0);
      comm_s.push_back(result.timings.comm_seconds);
      log::info("  rep {}/{}: prefill {:.1f} tok/s, decode {:.2f} tok/s", rep + 1, options.reps,
                prefill_tps.back(), decode_tps.back());
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
    const double rank_bytes = static_cast<double>(weight_bytes) + kv_bytes;
    const double effective_rank_gbps =
        seconds_per_token > 0 ? rank_bytes / seconds_per_token * 1e-9 : 0.0;
    const double effective_all_gbps =
        seconds_per_token > 0 ? all_rank_bytes / seconds_per_token * 1e-9 : 0.0;
    const double fraction = bandwidth.aggregate_read_gbps > 0
                                ? effective_all_gbps / bandwidth.aggregate_read_gbps
                                : 0.0;
    if (!job.is_root()) return 0;

    nlohmann::json out;
    out["model"] = options.engine.model_dir;
    out["parameters"] = config.parameter_count();
    out["weight_dtype"] = dtype_name(model.weights().embedding.dtype);
    out["tp"] = comm.size();
    out["threads_per_rank"] = num_threads();
    out["isa"] = kernels::cpu::isa_name(kernels::cpu::active_isa());
    out["prompt_len"] = options.prompt_len;
    out["gen"] = options.gen;
    out["reps"] = options.reps;
    out["prefill_tokens_per_s"] = median(prefill_tps);
    out["decode_tokens_per_s"] = median(decode_tps);
    out["decode_ms_per_token"] = median(decode_ms);
    out["comm_s_per_rep"] = median(comm_s);
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
    out["load_s"] = engine.load_seconds();

    fmt::print(stderr,
               "bench: {} params ({}), tp {}, {} thread(s)/rank, prompt {}, gen {}\n"
               "  prefill {:.1f} tok/s | decode {:.2f} tok/s = {:.2f} ms/token\n"
               "  decode reads {:.1f} MB/token (all ranks) -> {:.2f} GB/s effective = {:.0f}% of "
               "the measured {:.2f} GB/s streaming read\n",
               config.parameter_count(), dtype_name(model.weights().embedding.dtype), comm.size(),
               num_threads(), options.prompt_len, options.gen, median(prefill_tps),
               median(decode_tps), median(decode_ms), all_rank_bytes / 1e6, effective_all_gbps,
               100.0 * fraction, bandwidth.aggregate_read_gbps);
    const std::string text = out.dump();
    fmt::print("{}\n", text);
    if (!options.out.empty()) {
      std::ofstream file(options.out);
      SELFSPEC_CHECK(file.good(), "--out {}: cannot open for writing", options.out);
      file << out.dump(2) << "\n";
    }
    return 0;
  });
}

}  // namespace

void add_bench_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* command = app.add_subcommand(
      "bench", "prefill/decode speed and decode bandwidth vs the measured memory bandwidth");
  options->engine.add_to(*command);
  command->add_option("--prompt-len", options->prompt_len, "prompt tokens (random ids)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--gen", options->gen, "tokens to generate per repetition")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--reps", options->reps, "repetitions (median reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--seed", options->seed, "seed of the random prompt")->capture_default_str();
  command
      ->add_option("--bandwidth-mb", options->bandwidth_mb,
                   "buffer per rank for the bandwidth measurement (0: 4x last-level cache)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--out", options->out, "also write the JSON result to this file");
  command->add_flag("--json", options->json, "(the JSON line is always printed on stdout)");
  command->callback([options, &run] { run = [options] { return run_bench(*options); }; });
}

}  // namespace selfspec::launch
