#include "runtime/engine.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/process_identity.hpp"
#if SELFSPEC_HAVE_CUDA
#include "comm/nccl_comm.hpp"
#endif
#include "model/safetensors.hpp"

#include <chrono>

namespace selfspec {

namespace {

// --device auto|cpu|cuda.
DeviceKind choose_device(const std::string& device) {
  if (device == "auto") return cuda_unavailable_reason() ? DeviceKind::kCpu : DeviceKind::kCuda;
  const DeviceKind kind = parse_device_kind(device);
  if (kind == DeviceKind::kCuda) {
    if (const std::optional<std::string> reason = cuda_unavailable_reason()) {
      fail("--device cuda: {}", *reason);
    }
  }
  return kind;
}

}  // namespace

Engine::Engine(EngineOptions options, Communicator& comm)
    : options_(std::move(options)), comm_(comm) {
  const std::filesystem::path config_path = options_.model_dir / "config.json";
  SELFSPEC_CHECK(std::filesystem::is_directory(options_.model_dir), "--model {}: not a directory",
                 options_.model_dir.string());
  SELFSPEC_CHECK(std::filesystem::exists(config_path), "--model {}: config.json not found",
                 options_.model_dir.string());
  config_ = ModelConfig::from_file(config_path);
  shard_ = ShardPlan::make(config_, comm_.size(), comm_.rank());
  SELFSPEC_CHECK(options_.ctx_size >= 0, "--ctx-size must be >= 0 (got {})", options_.ctx_size);
  if (choose_device(options_.device) == DeviceKind::kCuda) {
    // One GPU per rank: the local rank picks it (OMPI_COMM_WORLD_LOCAL_RANK / SLURM_LOCALID).
    const int device = process_identity().local_rank % cuda_device_count();
    backend_ = make_cuda_backend(device);
#if SELFSPEC_HAVE_CUDA
    // NCCL needs one GPU per rank. Ranks sharing a GPU (logic tests) all-reduce through host
    // memory with MPI instead.
    if (comm_.size() > 1 && process_identity().local_size <= cuda_device_count()) {
      device_comm_ = std::make_unique<NcclComm>(comm_, device);
    } else if (comm_.size() > 1) {
      log::warn("{} ranks share {} GPU(s) on this node: activations are all-reduced through "
                "host memory with MPI (for logic tests; use one rank per GPU for speed)",
                process_identity().local_size, cuda_device_count());
    }
#endif
  } else {
    backend_ = make_cpu_backend();
  }
  backend_->set_graphs_enabled(options_.cuda_graphs);
  log::info("backend: {}", backend_->describe());
  if (!options_.tokenizer_path.empty()) {
    tokenizer_ = load_tokenizer(options_.tokenizer_path);
  } else {
    tokenizer_ = find_tokenizer(options_.model_dir);
  }
}

std::int64_t Engine::context_limit() const {
  return options_.ctx_size > 0 ? options_.ctx_size : config_.max_position_embeddings;
}

std::vector<std::int32_t> Engine::prepare_prompt(const std::optional<std::string>& text,
                                                 const std::vector<std::int32_t>& ids,
                                                 bool add_special_tokens) {
  std::vector<std::int32_t> prompt;
  if (comm_.is_root()) {
    if (text) {
      SELFSPEC_CHECK(tokenizer_ != nullptr,
                     "--prompt needs a tokenizer, but {} has neither tokenizer.json nor "
                     "tokenizer.model (use --tokenizer FILE or --prompt-ids)",
                     options_.model_dir.string());
      prompt = tokenizer_->encode(*text, add_special_tokens);
    } else {
      prompt = ids;
    }
    for (std::int32_t id : prompt) {
      SELFSPEC_CHECK(id >= 0 && id < config_.vocab_size,
                     "prompt token id {} is outside the model's vocabulary [0, {})", id,
                     config_.vocab_size);
    }
  }
  std::uint64_t count = prompt.size();
  comm_.broadcast_object(count, 0);
  prompt.resize(count);
  comm_.broadcast(std::as_writable_bytes(std::span(prompt)), 0);
  SELFSPEC_CHECK(!prompt.empty(), "the prompt is empty: give --prompt text or --prompt-ids");
  return prompt;
}

void Engine::check_context(std::int64_t n_prompt, std::int64_t max_new_tokens) const {
  SELFSPEC_CHECK(max_new_tokens >= 0, "--max-new-tokens must be >= 0 (got {})", max_new_tokens);
  if (n_prompt + max_new_tokens > context_limit()) {
    fail(
        "the prompt ({} tokens) plus --max-new-tokens ({}) is {} tokens, longer than the context "
        "of {} tokens ({}); shorten the prompt or lower --max-new-tokens",
        n_prompt, max_new_tokens, n_prompt + max_new_tokens, context_limit(),
        options_.ctx_size > 0 ? "--ctx-size" : "max_position_embeddings in config.json");
  }
}

void Engine::load() {
  const auto start = std::chrono::steady_clock::now();
  const Checkpoint checkpoint = Checkpoint::open(options_.model_dir);
  LlamaWeights weights =
      LlamaWeights::load(checkpoint, config_, shard_, options_.weights_dtype, *backend_);
  Communicator& activations = device_comm_ != nullptr ? *device_comm_ : comm_;
  model_ =
      std::make_unique<LlamaModel>(config_, shard_, std::move(weights), activations, *backend_);
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

LlamaModel& Engine::model() {
  SELFSPEC_CHECK(model_ != nullptr, "the model is not loaded");
  return *model_;
}

std::vector<std::int32_t> Engine::eos_ids() const {
  if (!config_.eos_token_ids.empty()) return config_.eos_token_ids;
  if (tokenizer_ != nullptr) return tokenizer_->eos_ids();
  return {};
}

}  // namespace selfspec
