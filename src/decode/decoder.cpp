#include "decode/decoder.hpp"

#include "core/error.hpp"
#include "decode/decoding_run.hpp"

namespace selfspec {

Decoder::Decoder(LlamaModel& model, Communicator& comm) : model_(model), comm_(comm) {}

Decoder::Decoder(LlamaModel& model, Communicator& comm, Drafter& drafter,
                 DraftLengthController& controller)
    : model_(model), comm_(comm), drafter_(&drafter), controller_(&controller) {}

void check_generation_inputs(std::span<const std::int32_t> prompt, const GenerationOptions& options,
                             const KvCache& kv) {
  SELFSPEC_CHECK(!prompt.empty(), "the prompt is empty (it needs at least one token, e.g. BOS)");
  SELFSPEC_CHECK(kv.length() == 0, "generate() needs an empty KV cache");
  SELFSPEC_CHECK(options.max_new_tokens >= 0, "--max-new-tokens must be >= 0 (got {})",
                 options.max_new_tokens);
  const auto n_prompt = static_cast<std::int64_t>(prompt.size());
  SELFSPEC_CHECK(n_prompt + options.max_new_tokens <= kv.capacity(),
                 "prompt ({} tokens) + max new tokens ({}) exceed the KV cache capacity ({})",
                 n_prompt, options.max_new_tokens, kv.capacity());
}

GenerationResult Decoder::generate(std::span<const std::int32_t> prompt,
                                   const GenerationOptions& options, KvCache& kv,
                                   const TokenCallback& on_token) {
  check_generation_inputs(prompt, options, kv);
  if (options.max_new_tokens == 0) return {};
  DecodingRun run(model_, comm_, drafter_, controller_, options, kv, on_token);
  run.first_token(prompt);
  while (!run.finished()) {
    const Draft& draft = run.draft();
    const Verdict verdict = run.verify(draft);
    run.commit(verdict);
  }
  return run.finish();
}

}  // namespace selfspec
