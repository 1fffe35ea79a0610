// The full model's view of one sequence for early-exit training data: one teacher-forced forward
// of the whole sequence (in chunks of positions, each a prefill forward that extends the KV cache)
// observing the residual stream that enters layer N — ForwardObserver's ("mlp_out", N-1), the
// same on every rank — and, from the vocab-sharded logits of every position, the full model's
// top-k next tokens with their log-probabilities under the full softmax (temperature 1):
//   ids:      SamplingParams{temperature 1, top_k k}'s warp, most likely first (logit descending,
//             id ascending), the first k;
//   logprob:  l_x − M − log Z, with M and Z the row's max and Σexp (logit_statistics.hpp's
//             canonical arithmetic, in double) and l_x the id's logit (ShardedLogits::logits_of).
// Under the model's tp-invariant reduction the statistics come from whole rows on rank 0
// (make_sharded_logits), so the rows are the same bits at every TP degree. Every rank calls it with
// the same arguments (it runs collectives); the rows are filled on rank 0.
#pragma once

#include "comm/communicator.hpp"
#include "model/llama_model.hpp"
#include "training_data/exit_data_rows.hpp"
#include "verify/sharded_logits.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace selfspec {

struct ExitTargetOptions {
  int exit_layer = 1;        // N: the hidden rows are the input of layer N (N = L: the final norm)
  std::int32_t top_k = 32;   // k
  std::int64_t chunk = 256;  // positions per forward (bounds the logits' memory)
};

// The targets of n logit rows (set in `logits`): rank 0 gets each row's first k ids of the top-k
// warp, their log-probabilities and the row's argmax; the other ranks take part (collectives)
// and get empty vectors but the ids.
struct TopKTargets {
  std::vector<std::int32_t> ids;     // [n × k]
  std::vector<float> logprobs;       // [n × k] (root)
  std::vector<std::int32_t> argmax;  // [n] (root)
};
TopKTargets top_k_targets(ShardedLogits& logits, Communicator& comm, std::int64_t n,
                          std::int32_t k);

// The rows of `sequence` (global index `sequence_index`): every position, in order. next_token is
// the sequence's next token, and at the last position the full model's greedy token. The
// reference for the batched collector (training_data/exit_data_collector.hpp), which gives the
// same rows bit for bit.
ExitDataRows exit_data_targets(LlamaModel& model, Communicator& comm,
                               std::span<const std::int32_t> sequence, std::int64_t sequence_index,
                               const ExitTargetOptions& options);

}  // namespace selfspec
