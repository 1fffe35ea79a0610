// The engine of one rank: the model's config, shard plan, tokenizer and compute backend (cheap,
// available before any weight is read, so bad TP degrees and over-long prompts fail fast), then
// the weights (a checkpoint's, or synthetic ones: model_source.hpp) and the LlamaModel. Every rank
// prints one start line (host, rank, device, threads) so a launch can be checked at a glance. With
// --device cuda (or auto on a machine with a GPU) the rank uses GPU local_rank % device_count.
// Prompts are prepared on rank 0 and broadcast, so every rank runs on identical token ids.
#pragma once

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "core/dtype.hpp"
#include "model/llama_model.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_config.hpp"
#include "model_io/model_source.hpp"
#include "tokenizer/tokenizer.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace selfspec {

struct EngineOptions {
  ModelSourceOptions source;             // --model / --architecture / synthetic weights
  int expected_tp = 0;                   // --tp: must equal the job's world size (0: any)
  std::filesystem::path tokenizer_path;  // empty: the tokenizer of the model (its dir or GGUF)
  // nullopt: as stored; a GGUF's quantized tensors run as stored ("native") on every backend.
  std::optional<DType> weights_dtype;
  bool native_weights_required = false;  // --weights-dtype native: no bf16 fallback
  // --weights-dtype q4_k (or another quantized format) with synthetic weights: their matrices
  // stored in that format (seeded random blocks, model_io/synthetic_quantized.hpp), run as stored.
  std::optional<WeightFormat> synthetic_matrix_format;
  // A quantized draft copy of the weights will be made (--draft-weights): the intermediate
  // dimension is cut at 32-feature groups, as for native quantized weights, so that the copy's
  // slices (and the tp-invariant reduction's chunks of them) are whole blocks.
  bool quantized_draft_weights = false;
  // The KV cache's element type (--kv-dtype): f32 or bf16; nullopt: auto, bf16 on a GPU (half
  // the bytes attention reads) and f32 on the CPU (the exact reference).
  std::optional<DType> kv_dtype;
  std::int64_t ctx_size = 0;    // 0: max_position_embeddings
  std::string device = "auto";  // cpu | cuda | auto (cuda when a GPU is usable)
  bool cuda_graphs = true;      // record and replay decode/verification forwards
  // Row-parallel sums (--reduction); nullopt: tp-invariant where the backend supports it (host
  // memory), rank-order elsewhere.
  std::optional<ReductionOrder> reduction = ReductionOrder::kRankOrder;
};

class Engine {
 public:
  Engine(EngineOptions options, Communicator& comm);

  const ModelConfig& config() const { return source_.config; }
  const ModelSource& source() const { return source_; }
  const ShardPlan& shard() const { return shard_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  Backend& backend() { return *backend_; }
  Communicator& comm() { return comm_; }
  const EngineOptions& options() const { return options_; }
  // The reduction order the model runs with (EngineOptions::reduction resolved for the backend).
  ReductionOrder reduction_order() const;
  // The KV cache's element type (EngineOptions::kv_dtype resolved for the backend).
  DType kv_dtype() const;
  // The longest sequence (prompt + generation) this run allows.
  std::int64_t context_limit() const;

  // Rank 0 tokenizes `text` (or takes `ids` when text is nullopt) and broadcasts the ids.
  std::vector<std::int32_t> prepare_prompt(const std::optional<std::string>& text,
                                           const std::vector<std::int32_t>& ids,
                                           bool add_special_tokens);
  // Throws when prompt + generation would not fit the context (before any weight is loaded).
  void check_context(std::int64_t n_prompt, std::int64_t max_new_tokens) const;

  // Reads this rank's weight slices and builds the model.
  void load();
  // Calls `body` with the model's tensors (the checkpoint, GGUF file or synthetic weights), for
  // reading whole tensors (an early-exit head's initial layer, the model's identity).
  void with_tensor_source(const std::function<void(const TensorSource&)>& body) const;
  // The dtype load() stores weights in (nullopt: as stored, quantized tensors natively).
  std::optional<DType> load_dtype() const;
  // Whether load() keeps a GGUF's quantized tensors quantized (the CPU backend, no dtype asked).
  bool native_quantized_weights() const;
  // model_io/model_identity.hpp's identity of this model (reads the final norm's weights).
  std::string model_identity() const;
  bool loaded() const { return model_ != nullptr; }
  LlamaModel& model();
  double load_seconds() const { return load_seconds_; }
  // End-of-sequence ids: config.json (and generation_config.json), else the tokenizer's.
  std::vector<std::int32_t> eos_ids() const;

 private:
  void announce_rank() const;

  EngineOptions options_;
  Communicator& comm_;
  ModelSource source_;
  ShardPlan shard_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;  // declared before model_: outlives it
  // The activations' all-reduces: NCCL on device memory for the CUDA backend over several ranks,
  // else the world communicator. Control messages and logits always use the world communicator.
  std::unique_ptr<Communicator> device_comm_;
  std::unique_ptr<LlamaModel> model_;
  double load_seconds_ = 0.0;
};

}  // namespace selfspec
