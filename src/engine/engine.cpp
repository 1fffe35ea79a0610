#include "engine/engine.hpp"

#include "backend/huge_pages.hpp"
#include "core/error.hpp"
#include "core/human_units.hpp"
#include "core/logging.hpp"
#include "core/process_identity.hpp"
#if SELFSPEC_HAVE_CUDA
#include "comm/nccl_comm.hpp"
#endif
#include "comm/collective_watchdog.hpp"
#include "comm/mpi_runtime.hpp"
#include "model_io/gguf_file.hpp"
#include "model_io/gguf_tensor_source.hpp"
#include "model_io/model_identity.hpp"
#include "model_io/safetensors.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <optional>
#include <string_view>

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
  source_ = resolve_model_source(options_.source);
  if (options_.expected_tp > 0 && options_.expected_tp != comm_.size()) {
    fail(
        "--tp {} but the job has {} rank(s): launch {} ranks (mpirun -np {} / srun -n {}) or "
        "change --tp",
        options_.expected_tp, comm_.size(), options_.expected_tp, options_.expected_tp,
        options_.expected_tp);
  }
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
      log::warn(
          "{} ranks share {} GPU(s) on this node: activations are all-reduced through "
          "host memory with MPI (for logic tests; use one rank per GPU for speed)",
          process_identity().local_size, cuda_device_count());
    }
#endif
  } else {
    backend_ = make_cpu_backend();
  }
  backend_->set_graphs_enabled(options_.cuda_graphs);
  if (options_.synthetic_matrix_format) {
    SELFSPEC_CHECK(source_.synthetic,
                   "--weights-dtype {}: a quantized format is for synthetic weights "
                   "(--architecture FILE or --synthetic); a GGUF's tensors keep their own formats "
                   "(--weights-dtype auto)",
                   weight_format_name(*options_.synthetic_matrix_format));
    SELFSPEC_CHECK(native_quantized_weights(), "--weights-dtype {}: the {} backend does not run it",
                   weight_format_name(*options_.synthetic_matrix_format),
                   device_kind_name(backend_->kind()));
  }
  if (options_.native_weights_required && source_.gguf && !native_quantized_weights()) {
    fail(
        "--weights-dtype native: the {} backend does not run quantized weights; use "
        "--weights-dtype bf16 (or auto, which picks bf16 there)",
        device_kind_name(backend_->kind()));
  }
  // Quantized weights run as stored, or a quantized draft copy of them, cut the intermediate
  // dimension at 32-feature groups.
  shard_ = ShardPlan::make(source_.config, comm_.size(), comm_.rank(),
                           native_quantized_weights() || options_.quantized_draft_weights ? 32 : 1);
  log::info("model: {}", source_.description);
  if (!options_.tokenizer_path.empty()) {
    tokenizer_ = load_tokenizer(options_.tokenizer_path);
  } else if (!source_.model_path.empty()) {
    tokenizer_ = find_tokenizer(source_.model_path);
  }
  announce_rank();
}

void Engine::announce_rank() const {
  // One line per rank, gathered to rank 0 and printed in rank order: where every rank runs, and
  // over which communicators (a build without MPI says so: it has only the local one).
  const ProcessIdentity& id = process_identity();
  std::string comms(comm_.name());
  if (device_comm_) comms += fmt::format(" + {}", device_comm_->name());
  if (!mpi_built()) comms += " (this build has no MPI)";
  const std::string line =
      fmt::format("[rank {}/{} {}] pid {}, local rank {}/{}, device {}, comm {}", id.rank, id.size,
                  id.host, static_cast<long>(getpid()), id.local_rank, id.local_size,
                  backend_->description().summary(), comms);
  constexpr std::size_t kLine = 192;
  std::array<char, kLine> mine{};
  line.copy(mine.data(), kLine - 1);
  std::vector<char> all(kLine * static_cast<std::size_t>(comm_.size()));
  comm_.gather_bytes(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all)), 0);
  if (!comm_.is_root()) return;
  for (int r = 0; r < comm_.size(); ++r) {
    log::info("start {}", std::string_view(all.data() + static_cast<std::size_t>(r) * kLine));
  }
}

DType Engine::kv_dtype() const {
  if (options_.kv_dtype) return *options_.kv_dtype;
  return backend_->kind() == DeviceKind::kCuda ? DType::kBF16 : DType::kF32;
}

std::int64_t Engine::context_limit() const {
  return options_.ctx_size > 0 ? options_.ctx_size : source_.config.max_position_embeddings;
}

std::vector<std::int32_t> Engine::prepare_prompt(const std::optional<std::string>& text,
                                                 const std::vector<std::int32_t>& ids,
                                                 bool add_special_tokens) {
  std::vector<std::int32_t> prompt;
  if (comm_.is_root()) {
    if (text) {
      SELFSPEC_CHECK(tokenizer_ != nullptr,
                     "--prompt needs a tokenizer, but {} has none (no tokenizer.json or "
                     "tokenizer.model; use --tokenizer FILE or --prompt-ids)",
                     source_.name);
      prompt = tokenizer_->encode(*text, add_special_tokens);
    } else {
      prompt = ids;
    }
    for (std::int32_t id : prompt) {
      SELFSPEC_CHECK(id >= 0 && id < source_.config.vocab_size,
                     "prompt token id {} is outside the model's vocabulary [0, {})", id,
                     source_.config.vocab_size);
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
        options_.ctx_size > 0 ? "--ctx-size" : "max_position_embeddings of the model");
  }
}

void Engine::with_tensor_source(const std::function<void(const TensorSource&)>& body) const {
  if (source_.synthetic) {
    const DType dtype = synthetic_weights_dtype(source_.config, options_.weights_dtype);
    const std::unique_ptr<TensorSource> synthetic =
        make_synthetic_tensor_source(source_, dtype, options_.synthetic_matrix_format);
    body(*synthetic);
  } else if (source_.gguf) {
    const GgufFile file(source_.model_path);
    const GgufTensorSource gguf(file, source_.config);
    body(gguf);
  } else {
    const Checkpoint checkpoint = Checkpoint::open(source_.model_path);
    body(CheckpointSource(checkpoint));
  }
}

std::optional<DType> Engine::load_dtype() const {
  // Synthetic weights are made in their dtype; a GGUF's quantized blocks stay quantized where the
  // backend runs them, else dequantize into the requested dtype, bf16 unless told (f32 keeps the
  // file's values exactly); safetensors keep theirs.
  if (source_.synthetic && options_.synthetic_matrix_format) return std::nullopt;  // as stored
  if (source_.synthetic) return synthetic_weights_dtype(source_.config, options_.weights_dtype);
  if (source_.gguf && !options_.weights_dtype && !native_quantized_weights()) return DType::kBF16;
  return options_.weights_dtype;
}

bool Engine::native_quantized_weights() const {
  if (source_.synthetic && options_.synthetic_matrix_format) {
    return backend_ != nullptr && backend_->runs_format(*options_.synthetic_matrix_format);
  }
  return source_.gguf && !options_.weights_dtype && backend_ != nullptr &&
         backend_->runs_format(WeightFormat::kQ4_K);
}

std::string Engine::model_identity() const {
  std::string identity;
  with_tensor_source([&](const TensorSource& source) {
    identity = selfspec::model_identity(source, source_.config);
  });
  return identity;
}

void Engine::load() {
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& config = source_.config;
  std::optional<LlamaWeights> weights;
  with_tensor_source([&](const TensorSource& source) {
    weights = LlamaWeights::load(source, config, shard_, load_dtype(), *backend_);
  });
  if (backend_->host_memory()) {
    // What the weights are held in, and whether they landed on huge pages (a decode step streams
    // them all; 4 KiB pages cost a TLB miss every 4 KiB).
    const HugePageStatus pages = huge_page_status();
    std::string formats;
    for (const auto& [format, bytes] : weights->bytes_by_format()) {
      formats += fmt::format("{}{} {}", formats.empty() ? "" : ", ", format, human_bytes(bytes));
    }
    log::info("weights: {} ({}); {}", human_bytes(weights->bytes()), formats,
              pages.known ? fmt::format("{} of this process's memory on transparent huge pages "
                                        "(THP {})",
                                        human_bytes(pages.anon_huge_bytes), pages.mode)
                          : std::string("huge pages unknown"));
  }
  Communicator& activations = device_comm_ != nullptr ? *device_comm_ : comm_;
  model_ =
      std::make_unique<LlamaModel>(config, shard_, std::move(*weights), activations, *backend_);
  model_->set_reduction_order(reduction_order());
  model_->set_kv_dtype(kv_dtype());
  // Ranks finish loading their shards at different times: wait for all of them here, under the
  // (long) load deadline, so the first forward's collectives start together and run under the
  // ordinary one.
  comm_.wait_for_peers(
      "barrier after loading weights",
      timeout_seconds_from_environment(kLoadTimeoutVariable, kDefaultLoadTimeoutSeconds));
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ReductionOrder Engine::reduction_order() const {
  if (options_.reduction) return *options_.reduction;
  return backend_->host_memory() ? ReductionOrder::kTpInvariant : ReductionOrder::kRankOrder;
}

LlamaModel& Engine::model() {
  SELFSPEC_CHECK(model_ != nullptr, "the model is not loaded");
  return *model_;
}

std::vector<std::int32_t> Engine::eos_ids() const {
  if (!source_.config.eos_token_ids.empty()) return source_.config.eos_token_ids;
  if (tokenizer_ != nullptr) return tokenizer_->eos_ids();
  return {};
}

}  // namespace selfspec
