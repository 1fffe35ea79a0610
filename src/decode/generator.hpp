// Autoregressive generation across tensor-parallel ranks with rank-0 control.
//
//   all ranks: prefill the prompt (chunked), logits of the last position only
//   loop:  all ranks: the verifier brings what rank 0 needs of the vocab-sharded logits
//          rank 0:    picks the next token, decides continue/stop (EOS, max_new_tokens)
//                     -> broadcast ControlMessage{command, token}
//          all ranks: stop, or forward the token (T = 1)
// Only rank 0 looks at logits; other ranks obey the message, so every rank runs the same
// sequence of forwards and collectives.
#pragma once

#include "comm/communicator.hpp"
#include "decode/sampler.hpp"
#include "decode/sharded_logits.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace selfspec {

struct GenerationOptions {
  std::int64_t max_new_tokens = 128;
  SamplingParams sampling;
  bool ignore_eos = false;
  std::vector<std::int32_t> eos_ids;
  std::int64_t prefill_chunk = 512;         // prompt tokens per prefill forward
  LogitsMode logits = LogitsMode::kGather;  // how rank 0 learns about vocab-sharded logits
  // Polled on rank 0 once per step: a non-zero value (a signal number) stops generation after the
  // tokens already chosen, on every rank (the stop travels in the control message).
  std::function<int()> interrupt;
};

struct GenerationTimings {
  double prefill_seconds = 0.0;  // prompt forward(s) + first token
  double decode_seconds = 0.0;   // every later token
  std::int64_t prefill_tokens = 0;
  std::int64_t decode_forwards = 0;
  double comm_seconds = 0.0;            // time inside collectives (all-reduce, gather, broadcast)
  double decode_forward_seconds = 0.0;  // wall time of the decode forwards alone
  double decode_tokens_per_second() const {
    return decode_seconds > 0.0 ? static_cast<double>(decode_forwards) / decode_seconds : 0.0;
  }
  double prefill_tokens_per_second() const {
    return prefill_seconds > 0.0 ? static_cast<double>(prefill_tokens) / prefill_seconds : 0.0;
  }
};

struct GenerationResult {
  std::vector<std::int32_t> tokens;  // generated ids (including a final EOS when one stopped it)
  bool stopped_on_eos = false;
  int interrupt_signal = 0;  // non-zero: stopped early by GenerationOptions::interrupt
  GenerationTimings timings;
};

// Called on rank 0 for each generated token, as soon as it is chosen.
using TokenCallback = std::function<void(std::int32_t token)>;

class Generator {
 public:
  Generator(LlamaModel& model, Communicator& comm);
  // Every rank calls this with the same prompt and options; kv must be empty and hold at least
  // prompt.size() + max_new_tokens slots.
  GenerationResult generate(std::span<const std::int32_t> prompt, const GenerationOptions& options,
                            KvCache& kv, const TokenCallback& on_token = {});

 private:
  LlamaModel& model_;
  Communicator& comm_;
};

// Checks the arguments every generation loop shares: an empty KV cache large enough for the
// prompt and max_new_tokens, and a non-negative token budget.
void check_generation_inputs(std::span<const std::int32_t> prompt, const GenerationOptions& options,
                             const KvCache& kv);

// Runs the prompt through the model in chunks (all ranks), leaving this rank's logits of the last
// prompt position in `logits`. Shared by the autoregressive and speculative loops.
void prefill(LlamaModel& model, std::span<const std::int32_t> prompt, std::int64_t chunk,
             KvCache& kv, std::vector<float>& logits);

}  // namespace selfspec
