#include "decode/generator.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "decode/control_message.hpp"
#include "decode/verifier.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>

namespace selfspec {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

void prefill(LlamaModel& model, std::span<const std::int32_t> prompt, std::int64_t chunk,
             KvCache& kv, std::vector<float>& logits) {
  SELFSPEC_CHECK(!prompt.empty(), "the prompt is empty (it needs at least one token, e.g. BOS)");
  chunk = std::max<std::int64_t>(chunk, 1);
  const auto n = static_cast<std::int64_t>(prompt.size());
  std::vector<std::int32_t> positions;
  log::Progress progress("prefill (tokens)", n);
  for (std::int64_t begin = 0; begin < n; begin += chunk) {
    const std::int64_t end = std::min(n, begin + chunk);
    positions.resize(static_cast<std::size_t>(end - begin));
    std::iota(positions.begin(), positions.end(), static_cast<std::int32_t>(kv.length()));
    const std::int32_t last_row = static_cast<std::int32_t>(end - begin - 1);
    ForwardArgs args;
    args.tokens =
        prompt.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
    args.positions = positions;
    if (end == n) args.logit_rows = {&last_row, 1};
    model.forward(args, kv, logits);
    if (n > chunk) progress.update(end);
  }
  if (n > chunk) progress.finish();
}

void check_generation_inputs(std::span<const std::int32_t> prompt, const GenerationOptions& options,
                             const KvCache& kv) {
  SELFSPEC_CHECK(kv.length() == 0, "generate() needs an empty KV cache");
  SELFSPEC_CHECK(options.max_new_tokens >= 0, "--max-new-tokens must be >= 0 (got {})",
                 options.max_new_tokens);
  const auto n_prompt = static_cast<std::int64_t>(prompt.size());
  SELFSPEC_CHECK(n_prompt + options.max_new_tokens <= kv.capacity(),
                 "prompt ({} tokens) + max new tokens ({}) exceed the KV cache capacity ({})",
                 n_prompt, options.max_new_tokens, kv.capacity());
}

Generator::Generator(LlamaModel& model, Communicator& comm) : model_(model), comm_(comm) {}

GenerationResult Generator::generate(std::span<const std::int32_t> prompt,
                                     const GenerationOptions& options, KvCache& kv,
                                     const TokenCallback& on_token) {
  check_generation_inputs(prompt, options, kv);
  const auto n_prompt = static_cast<std::int64_t>(prompt.size());
  GenerationResult result;
  if (options.max_new_tokens == 0) return result;

  Verifier verifier(options.logits, comm_, model_.shard(), options.sampling);
  const double comm_before = model_.counters().comm_seconds;
  std::vector<float> logits;

  auto start = Clock::now();
  prefill(model_, prompt, options.prefill_chunk, kv, logits);
  result.timings.prefill_tokens = n_prompt;

  ControlMessage message;
  double broadcast_seconds = 0.0;
  bool first = true;
  while (true) {
    // Rank 0 decides; everyone obeys.
    const std::int32_t next = verifier.next_token(logits);
    if (comm_.is_root()) {
      const std::int32_t token = next;
      result.tokens.push_back(token);
      const bool eos =
          !options.ignore_eos &&
          std::find(options.eos_ids.begin(), options.eos_ids.end(), token) != options.eos_ids.end();
      result.stopped_on_eos = eos;
      const bool complete =
          eos || static_cast<std::int64_t>(result.tokens.size()) >= options.max_new_tokens;
      const int signal = !complete && options.interrupt ? options.interrupt() : 0;
      message.command = complete || signal != 0 ? ControlCommand::kStop : ControlCommand::kContinue;
      message.n_tokens = 1;
      message.tokens[0] = token;
      message.flags = (eos ? kFlagEos : 0u) | (signal != 0 ? interrupted_flags(signal) : 0u);
      if (on_token) on_token(token);
    }
    const auto broadcast_start = Clock::now();
    comm_.broadcast_object(message, 0);
    broadcast_seconds += seconds_since(broadcast_start);
    ++message.step;
    if (!comm_.is_root()) result.tokens.push_back(message.tokens[0]);
    if (first) {
      result.timings.prefill_seconds = seconds_since(start);
      start = Clock::now();
      first = false;
    }
    if (message.command == ControlCommand::kStop) break;

    const std::int32_t token = message.tokens[0];
    const auto position = static_cast<std::int32_t>(kv.length());
    const std::int32_t row = 0;
    ForwardArgs args;
    args.tokens = {&token, 1};
    args.positions = {&position, 1};
    args.logit_rows = {&row, 1};
    const auto forward_start = Clock::now();
    model_.forward(args, kv, logits);
    result.timings.decode_forward_seconds += seconds_since(forward_start);
    ++result.timings.decode_forwards;
  }
  result.timings.decode_seconds = result.timings.decode_forwards > 0 ? seconds_since(start) : 0.0;
  result.stopped_on_eos = (message.flags & kFlagEos) != 0;
  result.interrupt_signal = interrupt_signal_of(message.flags);
  result.timings.comm_seconds =
      model_.counters().comm_seconds - comm_before + verifier.comm_seconds() + broadcast_seconds;
  return result;
}

}  // namespace selfspec
