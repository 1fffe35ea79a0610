// SWIFT's matchness for one window (§4.1 eq. 3): one parallel forward of a candidate draft plan
// over tokens already committed — teacher forcing, on top of the target's cached K/V for
// everything before them — counting the rows whose greedy token equals the token the target
// produced next. Shared by the on-the-fly search (DecodingRun::score_plan) and the offline one
// (search/matchness.hpp).
//
// Collective: every rank passes the same arguments; the argmax comes from `reader`'s per-shard
// reductions, and the counts are meaningful on rank 0. The forward cuts the cache back to
// `first_position` and writes the window's K/V rows there: restoring the target's rows is the
// caller's business (model/kv_rows.hpp).
#pragma once

#include "verify/sharded_logits.hpp"
#include "draft/drafter.hpp"
#include "model/kv_cache.hpp"
#include "model/layer_plan.hpp"
#include "model/llama_model.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace selfspec {

// inputs[i] runs at position first_position + i; row i is compared with targets[i] (the same
// length as inputs). vocabulary: a pruned draft head, or nullptr for the full one. `logits` is
// the caller's scratch buffer.
DraftMatch count_greedy_matches(LlamaModel& model, KvCache& kv, ShardedLogits& reader,
                                const LayerPlan& plan, const DraftVocabulary* vocabulary,
                                std::span<const std::int32_t> inputs,
                                std::span<const std::int32_t> targets, std::int64_t first_position,
                                std::vector<float>& logits);

}  // namespace selfspec
