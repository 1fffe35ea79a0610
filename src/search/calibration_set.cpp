// The calibration set of a skip-set search: see calibration_set.hpp.
#include "search/calibration_set.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "decode/decoder.hpp"

namespace selfspec {

std::vector<CalibrationSequence> build_calibration_set(
    LlamaModel& model, Communicator& comm, std::span<const std::vector<std::int32_t>> prompts,
    const CalibrationOptions& options) {
  SELFSPEC_CHECK(options.tokens >= 2, "calibration needs at least 2 tokens per prompt, not {}",
                 options.tokens);
  std::vector<CalibrationSequence> set;
  log::Progress progress("calibration continuations (prompts)",
                         static_cast<std::int64_t>(prompts.size()));
  for (const std::vector<std::int32_t>& prompt : prompts) {
    SELFSPEC_CHECK(!prompt.empty(), "calibration prompt {} is empty", set.size());
    const auto n = static_cast<std::int64_t>(prompt.size());
    KvCache kv = model.make_kv_cache(n + options.tokens);
    GenerationOptions generation;
    generation.max_new_tokens = options.tokens;
    generation.eos_ids = options.eos_ids;
    generation.prefill_chunk = options.prefill_chunk;
    generation.logits = LogitsMode::kLocal;
    Decoder decoder(model, comm);
    GenerationResult result = decoder.generate(prompt, generation, kv);
    const auto g = static_cast<std::int64_t>(result.tokens.size());
    // The loop feeds every emitted token but the last one.
    SELFSPEC_CHECK(kv.length() >= n + g - 1,
                   "calibration: the KV cache holds {} tokens after "
                   "generating {} from a {}-token prompt",
                   kv.length(), g, n);
    kv.truncate(n + g - 1);
    set.push_back({prompt, std::move(result.tokens), std::move(kv)});
    progress.update(static_cast<std::int64_t>(set.size()));
  }
  progress.finish();
  return set;
}

std::uint64_t calibration_fingerprint(std::span<const CalibrationSequence> set) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  const auto add = [&h](std::uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  for (const CalibrationSequence& s : set) {
    add(s.prompt.size());
    for (std::int32_t id : s.prompt) add(static_cast<std::uint32_t>(id));
    add(s.continuation.size());
    for (std::int32_t id : s.continuation) add(static_cast<std::uint32_t>(id));
  }
  return h;
}

}  // namespace selfspec
