#include "tests/support/decoding_runs.hpp"

#include "decode/decoder.hpp"
#include "draft/layer_skip_drafter.hpp"

#include <algorithm>
#include <utility>

namespace selfspec::testing {
namespace {

std::int64_t cache_slots(const std::vector<std::int32_t>& prompt, const GenerationOptions& options,
                         std::int64_t capacity) {
  return std::max<std::int64_t>(capacity,
                                static_cast<std::int64_t>(prompt.size()) + options.max_new_tokens);
}

}  // namespace

std::vector<std::int32_t> autoregressive(LlamaModel& model, Communicator& comm,
                                         const std::vector<std::int32_t>& prompt,
                                         const GenerationOptions& options, std::int64_t capacity) {
  KvCache kv = model.make_kv_cache(cache_slots(prompt, options, capacity));
  Decoder decoder(model, comm);
  return decoder.generate(prompt, options, kv).tokens;
}

GenerationResult speculative(LlamaModel& model, Communicator& comm,
                             const std::vector<std::int32_t>& prompt,
                             const GenerationOptions& generation, const LayerPlan& plan,
                             const ControllerOptions& controller_options, KvCache* kv_out,
                             Drafter* other_drafter, std::int64_t capacity) {
  KvCache kv = model.make_kv_cache(cache_slots(prompt, generation, capacity));
  LayerSkipDrafter skip_drafter(plan, "test");
  Drafter& drafter = other_drafter != nullptr ? *other_drafter : skip_drafter;
  auto controller = make_draft_length_controller(controller_options);
  Decoder decoder(model, comm, drafter, *controller);
  GenerationResult result = decoder.generate(prompt, generation, kv);
  if (kv_out != nullptr) *kv_out = std::move(kv);
  return result;
}

}  // namespace selfspec::testing
