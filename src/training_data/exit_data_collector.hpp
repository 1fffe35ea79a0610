// Early-exit training data for many sequences at once (issue 24): the sequences are generated
// (or, for existing text, only fed) B at a time by a BatchGenerator, and the rows are read from
// the very forwards that generate them — every position's exit-layer input (ForwardObserver's
// ("mlp_out", N-1)) and the full model's top-k log-probabilities from its logits — instead of a
// second, teacher-forced pass. By the bit-identity of batched rows (decode/batch_generator.hpp),
// each sequence's rows equal exit_data_targets' over the finished sequence bit for bit: the
// reference, which the tests hold it to. One pass records the inputs of several exit layers at
// once (a sweep over N costs one collection): one ExitDataRows per layer, equal but for `hidden`.
#pragma once

#include "comm/communicator.hpp"
#include "decode/batch_generator.hpp"
#include "model/llama_model.hpp"
#include "training_data/exit_data_rows.hpp"
#include "training_data/exit_data_targets.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace selfspec {

struct ExitDataCollectorOptions {
  // The N whose inputs every row records, distinct, in [1, L]: the residual stream after layers
  // [0, N); N = L is the final residual (before the final norm), a feature-level head's input.
  std::vector<int> exit_layers{1};
  std::int32_t top_k = 32;   // k
  std::int64_t chunk = 256;  // the most tokens per forward
  std::int64_t batch = 8;    // B: sequences in flight
  std::vector<std::int32_t> eos_ids;

  // exit_data_targets' options for exit layer i (the reference of its rows).
  ExitTargetOptions targets(std::size_t i) const { return {exit_layers.at(i), top_k, chunk}; }
};

class ExitDataCollector {
 public:
  // A finished sequence (every rank, in request order): its request index, its tokens (prompt
  // and generated), and its rows per exit layer, in exit_layers' order (rank 0; empty elsewhere;
  // sequence column = first_sequence + request). False stops the collection (every rank must
  // return the same).
  using SequenceCallback = std::function<bool(
      std::int64_t request, std::vector<std::int32_t>&& tokens, std::vector<ExitDataRows>&& rows)>;

  ExitDataCollector(LlamaModel& model, Communicator& comm, ExitDataCollectorOptions options);

  // Every rank calls this with the same requests. Returns false when the callback stopped it.
  bool run(std::span<const BatchRequest> requests, std::int64_t first_sequence,
           const SequenceCallback& on_sequence);

  const BatchGeneratorStats& stats() const { return stats_; }

 private:
  LlamaModel& model_;
  Communicator& comm_;
  ExitDataCollectorOptions options_;
  BatchGeneratorStats stats_;
};

}  // namespace selfspec
