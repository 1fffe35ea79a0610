// The decoding loop: plain or self-speculative generation across tensor-parallel ranks with
// rank-0 control. There is one loop; plain decoding is a round with no draft:
//
//   first token, then until rank 0 says stop:  draft → verify → commit
//
// (decode/decoding_run.hpp has the steps.) Greedy self-speculative output is token-identical to
// plain greedy output — and the logits bit-identical, by the kernels' token-count invariance —;
// sampled output follows the target distribution exactly (speculative sampling).
#pragma once

#include "comm/communicator.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/generation_options.hpp"
#include "decode/generation_result.hpp"
#include "draft/drafter.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"

#include <cstdint>
#include <span>

namespace selfspec {

class Decoder {
 public:
  // Plain decoding.
  Decoder(LlamaModel& model, Communicator& comm);
  // Self-speculative decoding: the drafter and the draft-length controller decide on rank 0
  // (every rank passes its own instances; the drafter's propose() runs on every rank).
  Decoder(LlamaModel& model, Communicator& comm, Drafter& drafter,
          DraftLengthController& controller);

  // Every rank calls this with the same prompt and options; kv must be empty and hold at least
  // prompt.size() + max_new_tokens slots. on_token is called on rank 0 as tokens are chosen.
  GenerationResult generate(std::span<const std::int32_t> prompt, const GenerationOptions& options,
                            KvCache& kv, const TokenCallback& on_token = {});

 private:
  LlamaModel& model_;
  Communicator& comm_;
  Drafter* drafter_ = nullptr;
  DraftLengthController* controller_ = nullptr;
};

// Checks what every run needs: a non-empty prompt, an empty KV cache large enough for the prompt
// and max_new_tokens, and a non-negative token budget.
void check_generation_inputs(std::span<const std::int32_t> prompt, const GenerationOptions& options,
                             const KvCache& kv);

}  // namespace selfspec
