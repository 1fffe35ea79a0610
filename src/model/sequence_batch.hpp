// Several independent sequences in one forward pass (issue 24): decoding is bound by streaming
// the weights, so B sequences' tokens in one pass cost little more than one sequence's. Used by
// the training-data collectors (collect-exit-data --batch, count-vocab --batch) and the base of
// serving several requests.
//
// Layout: contiguous per-sequence regions. The batch owns one KV cache of B × C slots; sequence b
// owns slots [b·C, (b+1)·C) of every layer and KV head, and its tokens sit at positions
// length(b), length(b) + 1, ... A pass takes any subset of the sequences, each with any number of
// new tokens; the matmuls run over all their rows at once, while K/V writes and attention run per
// sequence over its own region (Backend's KvSegment). Each kernel computes a token's row with a
// reduction order independent of the other rows (the token-count invariance of
// model/llama_model.hpp), so a sequence's logits and hidden states are bit-identical to a forward
// over that sequence alone, whatever B and its neighbours are, at every TP degree and reduction
// order. A paged layout would share slots between short and long sequences; the collectors'
// sequences have one known maximum length, for which fixed regions waste nothing.
// Causal only (no tree masks). Several sequences need a host-memory backend (the CUDA backend
// refuses segments); a batch of one runs plain forwards over its cache, on every backend.
#pragma once

#include "backend/backend.hpp"
#include "backend/logit_rows.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace selfspec {

class SequenceBatch {
 public:
  // `sequences` regions of `capacity_per_sequence` slots each, for `model`'s shard.
  SequenceBatch(const LlamaModel& model, std::int64_t sequences,
                std::int64_t capacity_per_sequence);

  std::int64_t size() const { return static_cast<std::int64_t>(lengths_.size()); }
  std::int64_t capacity_per_sequence() const { return capacity_; }
  // Tokens cached for sequence `sequence`.
  std::int64_t length(std::int64_t sequence) const;
  // Drops sequence `sequence`'s rows at or after `length` (0: the sequence starts over).
  void truncate(std::int64_t sequence, std::int64_t length);

  // One sequence's part of a pass: its new tokens (at positions length(sequence) + i) and the
  // rows among them whose logits are wanted.
  struct Step {
    std::int64_t sequence = 0;
    std::span<const std::int32_t> tokens;
    std::span<const std::int32_t> logit_rows;  // indices into `tokens`
  };
  // Runs the steps' tokens through the model in one forward (every rank, same steps; each
  // sequence at most once per pass) and extends their lengths. The logits are the steps' logit
  // rows in step order: [Σ logit_rows × vocab_local]. An observer sees the pass's rows in step
  // order (step 0's tokens, then step 1's, ...).
  LogitRows forward(LlamaModel& model, std::span<const Step> steps, std::vector<float>& logits,
                    const ForwardObserver* observer = nullptr,
                    std::span<const std::string_view> observe_only = {});

 private:
  KvCache kv_;
  std::int64_t capacity_;
  std::vector<std::int64_t> lengths_;
  // The last pass's inputs, reused to avoid allocations.
  std::vector<std::int32_t> tokens_, positions_, logit_rows_;
  std::vector<KvSegment> segments_;
};

}  // namespace selfspec
