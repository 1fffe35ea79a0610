// Plain decoding of many independent requests, several in every forward (issue 24): continuous
// batching over a SequenceBatch (model/sequence_batch.hpp). Decoding streams the weights once per
// forward whatever its row count, so B sequences per forward multiply the tokens per second by
// nearly B until the forward turns compute-bound.
//
// B slots hold requests in flight. Every pass, each slot feeds its next tokens: one for a slot
// that is decoding, and as much of its prompt as the pass's token budget leaves for a slot that
// is prefilling, oldest request first (decoding slots come first, so a long prompt never stalls
// the others; the oldest prompts first, so requests finish close to their order and few finished
// results wait for an older one). After the pass, every slot whose known tokens are all in the
// cache and whose request is still generating gets its next token from its own TokenPicker
// (greedy, or sampled from its own seeded stream: the same tokens as Decoder::generate with the
// same sampling parameters; rank 0 decides and broadcasts). A request ends at an end-of-sequence id
// (kept, as Decoder does) or after max_new_tokens; a finished slot takes the next request at the
// next pass. Results are handed over in request order.
//
// A sequence's tokens, logits and hidden states do not depend on B, on the pass budget or on its
// neighbours (SequenceBatch's bit-identity), so collectors may read every row (all_logit_rows,
// an observer) and get exactly what a teacher-forced forward over the finished sequence gives.
#pragma once

#include "comm/communicator.hpp"
#include "model/llama_model.hpp"
#include "verify/sampler.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace selfspec {

struct BatchRequest {
  std::vector<std::int32_t> prompt;  // non-empty
  std::int64_t max_new_tokens = 0;   // 0: the prompt alone (teacher forcing of existing text)
  SamplingParams sampling;           // greedy or seeded sampling
};

struct BatchResult {
  std::vector<std::int32_t> tokens;  // the generated tokens (the same on every rank)
  bool stopped_on_eos = false;
};

// One token row of a pass: which request, the token's position in its sequence, the token, and
// its row in the pass's logits (-1: none).
struct BatchRow {
  std::int64_t request = 0;
  std::int64_t position = 0;
  std::int32_t token = 0;
  std::int32_t logit_row = -1;
};

struct BatchGeneratorOptions {
  std::int64_t batch = 8;          // B: requests in flight
  std::int64_t pass_tokens = 256;  // the most tokens in one pass (bounds the logits' memory)
  std::vector<std::int32_t> eos_ids;
  // Runs every request's last token through the model as well (collectors want the states of
  // every position, the last included); otherwise a request ends when its last token is chosen.
  bool feed_last = false;
  // Logits for every row (collectors), not only for the rows that choose a token.
  bool all_logit_rows = false;
  // Sees each pass's intermediates (rows in the pass's order), filtered by observe_only.
  const ForwardObserver* observer = nullptr;
  std::span<const std::string_view> observe_only;
};

struct BatchGeneratorStats {
  std::int64_t passes = 0;
  std::int64_t tokens = 0;  // rows through the model
  double seconds = 0.0;
};

class BatchGenerator {
 public:
  // After each pass (every rank): its rows and logits (this rank's vocabulary shard).
  using PassCallback = std::function<void(std::span<const BatchRow>, const LogitRows&)>;
  // Each request's result, in request order (every rank); false stops the run (every rank must
  // return the same: decide on rank 0 and broadcast).
  using DoneCallback = std::function<bool(std::int64_t request, BatchResult&&)>;

  BatchGenerator(LlamaModel& model, Communicator& comm, BatchGeneratorOptions options);

  // Every rank calls this with the same requests. Returns false when on_done stopped the run.
  bool run(std::span<const BatchRequest> requests, const PassCallback& on_pass,
           const DoneCallback& on_done);

  const BatchGeneratorStats& stats() const { return stats_; }

 private:
  LlamaModel& model_;
  Communicator& comm_;
  BatchGeneratorOptions options_;
  BatchGeneratorStats stats_;
};

}  // namespace selfspec
