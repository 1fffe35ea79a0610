// The calibration set of a skip-set search: calibration prompts and the target model's own greedy
// continuation of each (what a draft has to predict), with the target's KV cache of prompt and
// continuation kept on every rank, so a candidate draft is scored against the full model without
// running the full model again (SWIFT §4.1: "the cached key-value pairs in the target LLM are
// reused by the draft").
//
// Collective: every rank builds the same set (the continuations come from rank 0's greedy picks,
// which travel in the decoding loop's control messages).
#pragma once

#include "comm/communicator.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace selfspec {

struct CalibrationSequence {
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> continuation;  // the target's greedy tokens (stops at EOS)
  KvCache kv;                              // the target's K/V of prompt + continuation[0 .. n−2]
};

struct CalibrationOptions {
  std::int64_t tokens = 64;  // greedy tokens per prompt
  std::vector<std::int32_t> eos_ids;
  std::int64_t prefill_chunk = 512;
};

// Generates the continuations (plain greedy decoding) and keeps the KV caches. Throws when a
// prompt is empty.
std::vector<CalibrationSequence> build_calibration_set(
    LlamaModel& model, Communicator& comm, std::span<const std::vector<std::int32_t>> prompts,
    const CalibrationOptions& options);

// A fingerprint of the prompts and continuations (FNV-1a over the ids), for resumable searches.
std::uint64_t calibration_fingerprint(std::span<const CalibrationSequence> set);

}  // namespace selfspec
