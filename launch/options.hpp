// The option registry: every option that more than one `selfspec` command takes is declared here
// once — name, help, validation and default — and each command adds the ones it takes to its
// CLI::App, bound to its own fields. Where the help differs by command, the command passes the
// command-specific part. Run configs (run_config.hpp) use these names as keys: rename nothing.
#pragma once

#include "core/dtype.hpp"
#include "core/weight_format.hpp"
#include "engine/engine.hpp"
#include "launch/jsonl_writer.hpp"
#include "launch/prompt_suite.hpp"
#include "tokenizer/tokenizer.hpp"
#include "verify/sampler.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec::launch {

// "--weights-dtype auto|native|f32|bf16|f16|<quantized format>": nullopt for auto, native and a
// quantized format (as stored).
std::optional<DType> parse_weights_dtype(const std::string& text);
// The quantized format a --weights-dtype value names (synthetic weights stored in it), or nullopt.
std::optional<WeightFormat> parse_quantized_weights_format(const std::string& text);

// Declares `--config FILE` on a command (run_config.hpp reads the file before parsing; the
// declaration is for --help and so that CLI11 accepts the option).
void add_config_option(CLI::App& command);

// --tp N (positive): "tensor-parallel degree <purpose>". A positive default is shown in --help
// (0, the engine's "any", is not).
CLI::Option* add_tp_option(CLI::App& command, int& tp, std::string_view purpose);

// Why this build cannot run a job of `--tp tp` ranks, or nullopt when it can: tensor parallelism
// needs tp MPI ranks, and a build without MPI (`mpi_built` false) runs a single rank.
std::optional<std::string> tp_unavailable_reason(int tp, bool mpi_built);

// --ctx-size N: "context length <purpose>"; 0 (the default) means max_position_embeddings.
CLI::Option* add_ctx_size_option(CLI::App& command, std::int64_t& ctx_size,
                                 std::string_view purpose);

// --weights-dtype auto|native|f32|bf16|f16|q4_0|...|q6_k (parse_weights_dtype,
// parse_quantized_weights_format); `auto_means` says what auto picks.
CLI::Option* add_weights_dtype_option(CLI::App& command, std::string& dtype,
                                      std::string_view auto_means);

// --kv-dtype auto|f32|bf16: the KV cache's element type; `auto_means` says what auto picks.
CLI::Option* add_kv_dtype_option(CLI::App& command, std::string& dtype,
                                 std::string_view auto_means);
// The KV dtype the option names (nullopt: auto); throws naming the option for another value.
std::optional<DType> parse_kv_dtype(const std::string& text);

// --prefill-chunk N (positive): prompt tokens per forward.
CLI::Option* add_prefill_chunk_option(CLI::App& command, std::int64_t& chunk);

// The prompt-suite selection of the tuning commands (count-vocab, search-skips,
// collect-exit-data): --prompts-file (required), --split (`split_help` says what it selects for),
// --tasks, --max-prompts-per-task.
void add_prompt_selection_options(CLI::App& command, std::vector<std::string>& files,
                                  PromptSelection& selection, std::string_view split_help);

// --seed S, with the command's help (what the seed seeds).
CLI::Option* add_seed_option(CLI::App& command, std::uint64_t& seed, std::string_view help);

// --json: "print the result as one JSON object, the last line of stdout, instead of <instead_of>".
CLI::Option* add_json_flag(CLI::App& command, bool& json, std::string_view instead_of);

// --out-jsonl FILE: "append <records> to FILE as JSON Lines, ...".
CLI::Option* add_out_jsonl_option(CLI::App& command, std::string& path, std::string_view records);

// --temperature, --top-k, --top-p, --seed.
struct SamplingCli {
  double temperature = 0.0;
  std::int32_t top_k = 0;
  double top_p = 1.0;
  std::uint64_t seed = 0;

  void add_to(CLI::App& command, std::string_view seed_help = "sampling seed");
  // The sampling parameters, validated (throws naming the option at fault).
  SamplingParams params() const;
};

// --json and --out-jsonl: where a command's JSON records go.
struct OutputCli {
  bool json = false;
  std::string out_jsonl;

  void add_to(CLI::App& command, std::string_view json_instead_of, std::string_view jsonl_records);
  // With --out-jsonl, on rank 0: the file, open for appending; otherwise null.
  std::unique_ptr<JsonlWriter> open_jsonl(bool is_root) const;
};

// --chat [--system TEXT]: the prompt text is the user message of a one-turn chat, rendered with
// the model's chat template and encoded as HF's apply_chat_template(tokenize=True) does (no
// special tokens added beyond what the template writes).
struct ChatCli {
  bool chat = false;
  std::string system;

  // `prompt_what` names the text that becomes the user message ("--prompt"). Returns the --chat
  // flag (for the command's excludes).
  CLI::Option* add_to(CLI::App& command, std::string_view prompt_what);
  // The chat of `user`: a system message when --system was given, then the user message.
  std::vector<ChatMessage> messages(std::string_view user) const;
  // The ids of `user` as a chat (throws when the tokenizer has no supported template).
  std::vector<std::int32_t> encode(const Tokenizer& tokenizer, std::string_view user) const;

 private:
  const CLI::Option* system_option_ = nullptr;
};

// Prints a JSON record as one line on stdout and flushes.
void print_json_line(const nlohmann::json& record);

// --model | --architecture [--synthetic-weights --synthetic-seed --layers], --tp, --tokenizer,
// --weights-dtype, --kv-dtype, --ctx-size, --threads, --device, --cuda-graphs, --config.
struct EngineCliOptions {
  std::string model_path;
  std::string architecture;
  bool synthetic_weights = false;
  std::uint64_t synthetic_seed = 0;
  std::int64_t layers = 0;
  int tp = 0;
  std::string tokenizer;
  std::string weights_dtype = "auto";
  std::string kv_dtype = "auto";
  std::int64_t ctx_size = 0;
  int threads = 0;
  std::string device = "auto";
  std::string cuda_graphs = "on";
  std::string reduction = "rank-order";  // model/reduction_order.hpp; "auto" as in EngineOptions

  void add_to(CLI::App& command);
  // Throws selfspec::Error naming --tp when this build cannot run it (tp_unavailable_reason).
  EngineOptions engine_options() const;
  // What the run's JSON calls the model: the directory, the GGUF file or the architecture file.
  std::string model_name() const { return model_path.empty() ? architecture : model_path; }
};

}  // namespace selfspec::launch
