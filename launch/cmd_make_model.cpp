// `selfspec make-model`: writes a seeded random checkpoint in the HF layout (config.json +
// safetensors), and with --gguf the same model as model.gguf beside it (its matrices in --dtype,
// or quantized with --gguf-type q4_0 .. q6_k, see model_io/gguf_export.hpp; llama Q/K rows
// permuted as llama.cpp's converter does). Used by tests, demos and benchmarks: a quantized GGUF
// runs on the engine's native quantized kernels with nothing downloaded.
#include "core/error.hpp"
#include "core/logging.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "model_io/gguf_export.hpp"
#include "model_io/planted_redundancy.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/synthetic_model.hpp"
#include "model_io/tensor_source.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec::launch {
namespace {

struct MakeModelOptions {
  std::string out;
  std::int64_t layers = 2;
  std::int64_t hidden = 64;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 0;      // 0: = heads
  std::int64_t head_dim = 0;      // 0: hidden / heads
  std::int64_t intermediate = 0;  // 0: about 8/3 hidden rounded to 8
  std::int64_t vocab = 256;
  std::int64_t max_position = 2048;
  double rope_theta = 10000.0;
  std::string rope_scaling = "none";
  double rope_factor = 8.0;
  bool tie = false;
  bool attention_bias = false;
  std::string dtype = "bf16";
  std::uint64_t seed = 0;
  double shard_mb = 0.0;
  bool gguf = false;
  std::string gguf_type;  // empty: the checkpoint's dtype
  std::string preset = "random";
  double redundant_fraction = 0.6;
  double lm_head_scale = 1.0;
  bool json = false;
};

// The planted-redundancy preset's geometry (~490 MB in bf16: memory-bandwidth bound on a CPU)
// unless the command line says otherwise.
void apply_preset_defaults(MakeModelOptions& options, const CLI::App& command) {
  if (options.preset != "planted-redundancy") return;
  const auto unless_given = [&](const char* flag, auto& field, auto value) {
    if (command.count(flag) == 0) field = value;
  };
  unless_given("--layers", options.layers, std::int64_t{16});
  unless_given("--hidden", options.hidden, std::int64_t{1024});
  unless_given("--heads", options.heads, std::int64_t{16});
  unless_given("--kv-heads", options.kv_heads, std::int64_t{4});
  unless_given("--intermediate", options.intermediate, std::int64_t{2816});
  unless_given("--vocab", options.vocab, std::int64_t{32000});
  unless_given("--lm-head-scale", options.lm_head_scale, 8.0);
}

std::filesystem::path gguf_path(const MakeModelOptions& options) {
  return std::filesystem::path(options.out) / "model.gguf";
}

// The types --gguf-type accepts (any case), as ggml names them.
constexpr GgmlType kGgufTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0,
    GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
};

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The type of model.gguf's matrices: --gguf-type, else the checkpoint's dtype.
GgmlType gguf_matrix_type(const MakeModelOptions& options, const SyntheticModelSpec& spec) {
  if (options.gguf_type.empty()) {
    return spec.dtype == DType::kF32   ? GgmlType::kF32
           : spec.dtype == DType::kF16 ? GgmlType::kF16
                                       : GgmlType::kBF16;
  }
  for (const GgmlType type : kGgufTypes) {
    if (lower(ggml_type_name(type)) == lower(options.gguf_type)) return type;
  }
  fail("--gguf-type: unknown type '{}'", options.gguf_type);
}

// model.gguf from the checkpoint just written.
void write_gguf_copy(const MakeModelOptions& options, const SyntheticModelSpec& spec) {
  const Checkpoint checkpoint = Checkpoint::open(options.out);
  export_gguf(CheckpointSource(checkpoint), spec.config, gguf_path(options),
              gguf_matrix_type(options, spec));
}

std::string skip_config_path(const MakeModelOptions& options) {
  return (std::filesystem::path(options.out) / "skips.json").string();
}

nlohmann::json make_model_record(const MakeModelOptions& options, const SyntheticModelSpec& spec,
                                 std::uint64_t bytes, double seconds,
                                 const std::optional<PlantedRedundancy>& planted) {
  nlohmann::json out = {{"out", options.out}, {"parameters", spec.config.parameter_count()},
                        {"bytes", bytes},     {"dtype", dtype_name(spec.dtype)},
                        {"seconds", seconds}, {"preset", options.preset}};
  if (options.gguf) {
    out["gguf"] = gguf_path(options).string();
    out["gguf_type"] = ggml_type_name(gguf_matrix_type(options, spec));
  }
  if (planted) {
    out["redundant_attention"] = planted->redundant_attention;
    out["redundant_mlp"] = planted->redundant_mlp;
    out["skip_config"] = skip_config_path(options);
  }
  return out;
}

void print_summary(const MakeModelOptions& options, const SyntheticModelSpec& spec,
                   std::uint64_t bytes, double seconds,
                   const std::optional<PlantedRedundancy>& planted) {
  fmt::print("wrote {}: {} parameters, {:.1f} MB of {} weights in {:.1f} s\n", options.out,
             spec.config.parameter_count(), static_cast<double>(bytes) / 1e6,
             dtype_name(spec.dtype), seconds);
  if (options.gguf) {
    fmt::print("wrote {} (the same model as GGUF, {} matrices)\n", gguf_path(options).string(),
               ggml_type_name(gguf_matrix_type(options, spec)));
  }
  if (planted) {
    fmt::print(
        "planted redundancy (synthetic): {} weak attention and {} weak MLP sublayers; "
        "skip set in {}\n",
        planted->redundant_attention.size(), planted->redundant_mlp.size(),
        skip_config_path(options));
  }
}

int run_make_model(const MakeModelOptions& options) {
  std::int64_t intermediate = options.intermediate;
  if (intermediate == 0) intermediate = (options.hidden * 8 / 3 + 7) / 8 * 8;
  SyntheticModelSpec spec;
  spec.config = make_synthetic_config(options.layers, options.hidden, options.heads,
                                      options.kv_heads > 0 ? options.kv_heads : options.heads,
                                      intermediate, options.vocab);
  if (options.head_dim > 0) spec.config.head_dim = options.head_dim;
  spec.config.max_position_embeddings = options.max_position;
  spec.config.rope_theta = options.rope_theta;
  spec.config.tie_word_embeddings = options.tie;
  spec.config.attention_bias = options.attention_bias;
  if (options.rope_scaling == "linear") {
    spec.config.rope_scaling.type = RopeScalingType::kLinear;
    spec.config.rope_scaling.factor = options.rope_factor;
  } else if (options.rope_scaling == "llama3") {
    spec.config.rope_scaling.type = RopeScalingType::kLlama3;
    spec.config.rope_scaling.factor = options.rope_factor;
    spec.config.rope_scaling.original_max_position_embeddings =
        std::max<std::int64_t>(1, options.max_position / 4);
  }
  const std::optional<DType> dtype = parse_dtype(options.dtype);
  SELFSPEC_CHECK(dtype.has_value(), "--dtype: unknown dtype '{}'", options.dtype);
  spec.dtype = *dtype;
  spec.seed = options.seed;
  spec.max_shard_bytes = static_cast<std::uint64_t>(options.shard_mb * 1e6);
  spec.lm_head_scale = options.lm_head_scale;
  std::optional<PlantedRedundancy> planted;
  if (options.preset == "planted-redundancy") {
    planted = plant_redundancy(static_cast<int>(options.layers), options.redundant_fraction,
                               options.seed);
    apply_planted_redundancy(*planted, options.lm_head_scale, spec);
  }

  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t bytes = write_synthetic_model(spec, options.out);
  if (planted)
    write_planted_redundancy_files(*planted, static_cast<int>(options.layers), options.out);
  if (options.gguf) write_gguf_copy(options, spec);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.json) {
    print_json_line(make_model_record(options, spec, bytes, seconds, planted));
  } else {
    print_summary(options, spec, bytes, seconds, planted);
  }
  return 0;
}

}  // namespace

void add_make_model_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<MakeModelOptions>();
  CLI::App* command = app.add_subcommand(
      "make-model",
      "write a seeded random LLaMA checkpoint (HF layout: config.json + safetensors)");
  command->add_option("--out", options->out, "output directory")->required();
  command->add_option("--layers", options->layers, "decoder layers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--hidden", options->hidden, "hidden size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--heads", options->heads, "attention heads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--kv-heads", options->kv_heads, "key/value heads (default: --heads)")
      ->check(CLI::PositiveNumber);
  command->add_option("--head-dim", options->head_dim, "head dimension (default: hidden/heads)")
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--intermediate", options->intermediate,
                   "MLP intermediate size (default: ~8/3 hidden)")
      ->check(CLI::PositiveNumber);
  command->add_option("--vocab", options->vocab, "vocabulary size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--max-position", options->max_position, "max_position_embeddings")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--rope-theta", options->rope_theta, "RoPE base")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--rope-scaling", options->rope_scaling, "none, linear or llama3")
      ->check(CLI::IsMember({"none", "linear", "llama3"}))
      ->capture_default_str();
  command->add_option("--rope-factor", options->rope_factor, "rope_scaling factor")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_flag("--tie-embeddings", options->tie, "tie the LM head to the embedding");
  command->add_flag("--attention-bias", options->attention_bias, "q/k/v projection biases");
  command->add_option("--dtype", options->dtype, "weight dtype")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  add_seed_option(*command, options->seed, "random seed");
  command
      ->add_option("--shard-mb", options->shard_mb,
                   "split into shards of at most this many MB (+ index.json); 0 = one file")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* gguf = command->add_flag(
      "--gguf", options->gguf, "also write the model as model.gguf (llama.cpp's layout) in --out");
  std::vector<std::string> gguf_types;
  for (const GgmlType type : kGgufTypes) gguf_types.push_back(lower(ggml_type_name(type)));
  command
      ->add_option("--gguf-type", options->gguf_type,
                   "model.gguf's matrix type, any case (default: --dtype; norms stay f32); a "
                   "matrix whose rows are not whole blocks falls back as llama.cpp's quantize "
                   "does (q4_k to q5_0, q5_k to q5_1, q6_k to q8_0, else f16)")
      ->check(CLI::IsMember(gguf_types, CLI::ignore_case))
      ->needs(gguf);
  command
      ->add_option("--preset", options->preset,
                   "random, or planted-redundancy: a synthetic demo where layer skipping makes "
                   "sense (graded weak sublayers, peaked next-token distribution, ~490 MB)")
      ->check(CLI::IsMember({"random", "planted-redundancy"}))
      ->capture_default_str();
  command
      ->add_option("--redundant-fraction", options->redundant_fraction,
                   "planted-redundancy: fraction of the 2L sublayers made weak")
      ->check(CLI::Range(0.0, 0.95))
      ->capture_default_str();
  command
      ->add_option("--lm-head-scale", options->lm_head_scale,
                   "LM head multiplier (peakier distributions; planted-redundancy default 8)")
      ->check(CLI::PositiveNumber);
  add_json_flag(*command, options->json, "the summary line");
  command->callback([options, command, &run] {
    apply_preset_defaults(*options, *command);
    run = [options] { return run_without_job([&] { return run_make_model(*options); }); };
  });
}

}  // namespace selfspec::launch
