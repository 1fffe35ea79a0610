// Greedy runs of a loaded model for the losslessness tests: plain decoding, and self-speculative
// decoding with a layer-skip draft (or another drafter) under a draft-length controller. The KV
// cache holds the prompt and the new tokens unless a larger `capacity` is asked for (a token
// tree's nodes beyond the new tokens need room).
#pragma once

#include "comm/communicator.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/generation_options.hpp"
#include "decode/generation_result.hpp"
#include "draft/drafter.hpp"
#include "model/kv_cache.hpp"
#include "model/layer_plan.hpp"
#include "model/llama_model.hpp"

#include <cstdint>
#include <vector>

namespace selfspec::testing {

std::vector<std::int32_t> autoregressive(LlamaModel& model, Communicator& comm,
                                         const std::vector<std::int32_t>& prompt,
                                         const GenerationOptions& options,
                                         std::int64_t capacity = 0);

// `other_drafter` (not null) drafts instead of the plan's layer-skip drafter; `kv_out` (not null)
// receives the run's KV cache.
GenerationResult speculative(LlamaModel& model, Communicator& comm,
                             const std::vector<std::int32_t>& prompt,
                             const GenerationOptions& generation, const LayerPlan& plan,
                             const ControllerOptions& controller_options, KvCache* kv_out = nullptr,
                             Drafter* other_drafter = nullptr, std::int64_t capacity = 0);

}  // namespace selfspec::testing
