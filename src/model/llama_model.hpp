// A LLaMA-family decoder on one tensor-parallel rank: forward(tokens, positions, plan, mask, kv).
//
// Layer l, when its sublayers run (LayerPlan):
//   x += AllReduce(o_proj(Attention(RoPE(q_proj(RMSNorm(x))), RoPE(k_proj(..)), v_proj(..))))
//   x += AllReduce(down_proj(SiLU(gate_proj(RMSNorm(x))) * up_proj(RMSNorm(x))))
// and finally logits = lm_head(RMSNorm(x)) for the requested rows (this rank's vocabulary shard).
// Under ReductionOrder::kTpInvariant the o_proj/down_proj products and their all-reduce are one
// fixed-partition projection instead (model/fixed_partition_projection.hpp), which makes the
// forward bit-identical at every TP degree.
// The embedding is vocab-parallel: each rank writes the rows it owns and zeros elsewhere, and an
// all-reduce assembles them exactly.
//
// The ops run on a Backend (CPU or CUDA); the residual add of each sublayer is fused with the next
// sublayer's RMSNorm (Backend::add_rmsnorm). forward() sizes its workspaces (allocations happen
// only there, never inside the launches), then hands the backend one Backend::run_forward: the
// inputs, the LaunchShape (layer plan words, T, tree-mask presence, logit rows, the KV cache, and
// whether the launches can be recorded: not with an observer or a host communicator) and the
// launches (run_layers). Whether the launches run eagerly or are recorded and replayed as a CUDA
// graph, and when recorded graphs go stale, is the backend's business.
//
// A draft forward may compute the LM head over a pruned vocabulary only (ForwardArgs::
// draft_vocabulary, model/draft_vocabulary.hpp): the kept ids' logits, -inf for every other id.
//
// Token-count invariance: every kernel computes each token's row with a fixed reduction order
// (kernels/cpu/matmul.hpp; kernels/cuda/cuda_kernels.hpp for the GPU's decode and verification
// sizes), the attention of a token depends only on the slots it can see, and the all-reduce is
// elementwise — so a token's logits are bit-identical whether it is computed alone (decode),
// among drafted tokens (verification) or, on the CPU, among the prompt (prefill).
#pragma once

#include "backend/backend.hpp"
#include "backend/logit_rows.hpp"
#include "comm/communicator.hpp"
#include "model/attention_mask.hpp"
#include "model/draft_forward.hpp"
#include "model/draft_vocabulary.hpp"
#include "model/exit_head.hpp"
#include "model/feature_head.hpp"
#include "model/fixed_partition_projection.hpp"
#include "model/kv_cache.hpp"
#include "model/layer_plan.hpp"
#include "model/llama_weights.hpp"
#include "model/reduction_order.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_config.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace selfspec {

// Sees named intermediates of a forward pass ("embed", then for each layer "attn_out" and
// "mlp_out" — the residual stream after the sublayer, whether it ran or not —, "final_residual"
// (the residual stream after the last layer that ran, before the final norm: a feature head's
// input) and "final_norm" for the logit rows): data is [n_tokens × hidden]. For debugging dumps and
// for drafters that measure how much a sublayer changes the hidden state.
using ForwardObserver = std::function<void(std::string_view name, int layer,
                                           std::span<const float> data, std::int64_t n_tokens)>;

struct ForwardArgs {
  std::span<const std::int32_t> tokens;
  std::span<const std::int32_t> positions;
  const AttentionMask* mask = nullptr;       // nullptr: causal
  std::span<const std::int32_t> logit_rows;  // token rows whose logits are wanted
  const ForwardObserver* observer = nullptr;
  // Empty: the observer sees every named intermediate. Otherwise only these names reach it, and
  // on a device backend only these are copied to the host (Cali-TS needs "final_norm" alone, not
  // every layer's residual stream).
  std::span<const std::string_view> observe_only;
  // What a draft forward reads (model/draft_forward.hpp); the default is the full model.
  DraftForward draft;
  // On a device-memory backend: leave the logits where the LM head wrote them (device-side
  // verification reads them there, through the backend's shard reductions); forward's host
  // vector is then left empty. Ignored on host-memory backends.
  bool keep_logits_on_device = false;
  // Empty: one sequence, continuing the KV cache at kv.length(). Otherwise several independent
  // sequences in one pass (model/sequence_batch.hpp owns their layout): each segment's tokens
  // continue its own region of the cache, and forward leaves kv.length() alone. Causal only (no
  // mask), host-memory backends only.
  std::span<const KvSegment> segments;
};

// Counters for the per-phase breakdown of benchmarks.
struct ForwardCounters {
  std::int64_t forwards = 0;
  std::int64_t tokens = 0;
  std::int64_t all_reduces = 0;
  double comm_seconds = 0.0;
  double total_seconds = 0.0;
};

class LlamaModel {
 public:
  // `comm` carries the activations' all-reduces; `backend` must outlive the model (the weights
  // live in its memory).
  LlamaModel(ModelConfig config, ShardPlan shard, LlamaWeights weights, Communicator& comm,
             Backend& backend);

  const ModelConfig& config() const { return config_; }
  const ShardPlan& shard() const { return shard_; }
  const LlamaWeights& weights() const { return weights_; }
  Communicator& comm() { return comm_; }
  Backend& backend() { return backend_; }
  const Backend& backend() const { return backend_; }
  std::int64_t vocab_local() const { return shard_.vocab.size(); }

  // A KV cache for this rank's heads holding `capacity` token slots (with an exit or feature head
  // attached: one more layer, the head's, at index num_layers), in kv_dtype().
  KvCache make_kv_cache(std::int64_t capacity) const;
  // The element type of the caches make_kv_cache makes: f32 (the default, the exact reference) or
  // bf16 (half the KV bytes; each written K/V value rounded to nearest even). Throws otherwise.
  void set_kv_dtype(DType dtype);
  DType kv_dtype() const { return kv_dtype_; }

  // Attaches an early-exit head (model/exit_head.hpp). From then on every forward over a cache
  // with the head's layer also writes that layer's K/V from the residual stream after layer N - 1
  // (a side branch that leaves the model's own computation bit for bit unchanged), so the head's
  // cache always holds what the target's hidden states give; early-exit forwards run the head.
  void attach_exit_head(ExitHead head);
  const ExitHead* exit_head() const { return exit_head_ ? &*exit_head_ : nullptr; }

  // Attaches a feature-level draft head (model/feature_head.hpp; not beside an exit head: both
  // keep their K/V in the cache's extra layer). Only feature-head draft forwards
  // (ForwardArgs::draft.features) read and write that layer.
  void attach_feature_head(FeatureHead head);
  const FeatureHead* feature_head() const { return feature_head_ ? &*feature_head_ : nullptr; }

  // Attaches the draft's quantized copy of the weights (model/llama_weights.hpp's DraftWeights),
  // which forwards with ForwardArgs::draft_weights read. Every rank attaches its own slices.
  void attach_draft_weights(DraftWeights draft);
  const DraftWeights* draft_weights() const { return draft_ ? &*draft_ : nullptr; }

  // How the row-parallel projections add up the ranks' partial products (model/
  // reduction_order.hpp). kTpInvariant cuts o_proj and down_proj (and an attached exit head's)
  // into the fixed partition of num_attention_heads chunks, so that every forward is
  // bit-identical at every TP degree; it throws on a device-memory backend. Call it on every
  // rank with the same value, between forwards.
  void set_reduction_order(ReductionOrder order);
  ReductionOrder reduction_order() const {
    return fixed_partition_ ? ReductionOrder::kTpInvariant : ReductionOrder::kRankOrder;
  }

  // Runs the tokens through the model (every rank, same arguments), appending their K/V at slots
  // [kv.length(), kv.length() + T) and extending kv by T. Fills `logits` with this rank's vocab
  // shard for each of args.logit_rows: [logit_rows.size() × vocab_local()].
  // Returns the view of the requested rows' logits: in `logits` (host memory), or in the
  // backend's memory with keep_logits_on_device on a device backend, valid until the next
  // forward.
  LogitRows forward(const ForwardArgs& args, KvCache& kv, std::vector<float>& logits);

  const ForwardCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

 private:
  using Observe = std::function<void(std::string_view, int, const float*, std::int64_t)>;
  // Every launch of a forward pass, from the embedding to the LM head: the `launches` of
  // Backend::run_forward (a recording backend may replay them instead of calling this).
  void run_layers(const LayerPlan& plan, const ForwardInputs& inputs, KvCache& kv,
                  std::int64_t n_tokens, float* logits_out, const DraftVocabulary* vocabulary,
                  bool early_exit, bool draft_weights, const Observe& observe);
  // Throws unless a feature-head draft forward's arguments fit the head and the cache.
  void check_feature_forward(const ForwardArgs& args, KvCache& kv) const;
  // Every launch of a feature-head draft forward (model/feature_head.hpp): its rows' u from the
  // uploaded features and the tokens' embeddings, the head's layer, the final norm and LM head.
  void run_feature_head(std::int64_t n_tokens, std::int64_t n_rows, KvCache& kv, float* logits_out,
                        const DraftVocabulary* vocabulary, bool draft_weights,
                        const Observe& observe);
  // The final norm and the LM head (`output`, or the draft vocabulary's) for the logit rows.
  void lm_head(std::int64_t n_rows, const Matrix& output, float* logits_out,
               const DraftVocabulary* vocabulary, const Observe& observe);
  void all_reduce(float* data, std::int64_t count);
  // A layer's o_proj and down_proj cut into the fixed partition's chunks (kTpInvariant).
  struct LayerChunks {
    FixedPartitionProjection::Weight wo, down;
  };
  LayerChunks cut_layer(const LayerWeights& w) const;
  // Layer `layer`'s chunks (num_layers: the exit head's; draft: the draft copy's layer);
  // nullptr under kRankOrder.
  const LayerChunks* layer_chunks(int layer, bool draft = false) const;
  // The fixed partition's chunks of every layer, the exit head's and the draft copy's.
  void cut_all_layers();
  // out = x · Wᵀ summed over the ranks: the matmul and the all-reduce, or, given W's chunks, the
  // fixed-partition projection.
  void row_parallel(const float* x, std::int64_t n_tokens, const Matrix& w,
                    const FixedPartitionProjection::Weight* chunks, float* out);
  // The input norm of a sublayer, absorbing the previous sublayer's pending residual delta.
  void norm(const Vector& weight, std::int64_t n_tokens);
  // Adds a pending residual delta to x (before observers, the final norm, skipped blocks).
  void flush_residual(std::int64_t n_tokens);
  // A layer's sublayers; kv_layer: the KV cache layer its attention reads and writes.
  void attention_block(const LayerWeights& w, int kv_layer, KvCache& kv, std::int64_t n_tokens,
                       bool draft = false);
  void mlp_block(const LayerWeights& w, int layer, std::int64_t n_tokens, bool draft = false);
  // Whether a sublayer's output projection adds into x_ in its epilogue (the backend's
  // matmul_accumulate): one rank, no fixed-partition chunks, no pending delta, and the backend
  // offers it. Otherwise the projection leaves its output pending (row_parallel).
  bool residual_add_fused(std::int64_t n_tokens, const Matrix& w, const LayerChunks* chunks) const;
  // The exit head's K/V for the current tokens, from the residual stream (side branch).
  void exit_kv_branch(KvCache& kv, std::int64_t n_tokens);
  // K and V of the normed rows in h_ (w's projections, biases, RoPE) into KV-cache layer `layer`.
  void write_layer_kv(const LayerWeights& w, int layer, KvCache& kv, std::int64_t n_tokens);
  // The K and V biases (attention_bias models) on the rows in k_ and v_.
  void add_kv_biases(const LayerWeights& w, std::int64_t n_tokens);
  // The position step's operands: q (null: K and V only) and the scratch K and V.
  Backend::RopeKv rope_kv_args(float* q);
  // RoPE on q (when not null) and on k_, then k_ and v_ into KV-cache layer `layer`.
  void rope_and_write_kv(float* q, int layer, KvCache& kv);
  // Grows the RoPE table to cover every position given (throws for a negative one).
  void ensure_rope_positions(std::span<const std::int32_t> positions);
  float* workspace(DeviceBuffer& buffer, std::size_t floats);
  // Whether this forward's observer wants intermediate `name` (ForwardArgs::observe_only).
  bool observes(const Observe& observe, std::string_view name) const;

  ModelConfig config_;
  ShardPlan shard_;
  LlamaWeights weights_;
  Communicator& comm_;
  Backend& backend_;
  // The RoPE table (kernels/cpu/rope.hpp) of inv_freq_ for positions [0, rope_positions_), in
  // backend memory; grown before a forward whose positions it does not cover.
  std::vector<float> inv_freq_;
  DeviceBuffer rope_table_;
  std::int64_t rope_positions_ = 0;
  LayerPlan full_plan_;
  std::int64_t q_local_;
  std::int64_t kv_local_;
  DType kv_dtype_ = DType::kF32;
  std::int64_t inter_local_;

  // Workspace in backend memory, grown to the largest T seen.
  DeviceBuffer x_, h_, q_, k_, v_, attn_, o_, gate_, up_, logits_;
  DeviceBuffer features_;      // a feature-head draft forward's input rows [T × hidden]
  DeviceBuffer draft_logits_;  // [rows × V'_local]: a draft vocabulary's logits before scattering
  const float* pending_ = nullptr;                  // residual delta not yet added to x_
  std::span<const std::string_view> observe_only_;  // the current forward's filter
  ForwardCounters counters_;
  std::optional<ExitHead> exit_head_;
  std::optional<FeatureHead> feature_head_;
  std::optional<DraftWeights> draft_;
  // kTpInvariant: the projection and every layer's chunks (the exit head's at index num_layers),
  // and the draft copy's layers' chunks.
  std::unique_ptr<FixedPartitionProjection> fixed_partition_;
  std::vector<LayerChunks> layer_chunks_;
  std::vector<LayerChunks> draft_chunks_;
};

}  // namespace selfspec
