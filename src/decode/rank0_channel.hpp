// Rank 0's voice in the decoding loop, and every rank's ear (docs/ARCHITECTURE.md, "The rank-0
// protocol"). The channel owns the step's ControlMessage and the output. Rank 0 fills the message
// and emits the generated tokens (into the output and the token callback), decides
// when generation ends — an end-of-sequence id, max_new_tokens, or a stop request polled once per
// step — and broadcasts each decision as one fixed-size ControlMessage; the other ranks only obey
// what the messages say and adopt the tokens they carry, so every rank runs the same forwards and
// collectives and holds the same output.
//
// --debug-sync: after every message each rank contributes a checksum of (message, step counter,
// KV length) to an all-gather; any difference is reported on every rank as a divergence error
// instead of a later hang.
#pragma once

#include "comm/communicator.hpp"
#include "decode/control_message.hpp"
#include "decode/generation_options.hpp"
#include "model/kv_cache.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace selfspec {

class Rank0Channel {
 public:
  Rank0Channel(Communicator& comm, const GenerationOptions& options, const TokenCallback& on_token);

  // The step's message: rank 0 writes its decisions here before a broadcast; every rank reads
  // rank 0's after one.
  ControlMessage& message() { return message_; }
  const ControlMessage& message() const { return message_; }
  // The output so far (every rank holds the same tokens once a step's broadcast is done).
  const std::vector<std::int32_t>& tokens() const { return tokens_; }
  std::vector<std::int32_t> take_tokens() { return std::move(tokens_); }

  bool is_root() const { return comm_.is_root(); }
  // Rank 0: tokens still allowed by max_new_tokens.
  std::int64_t remaining() const;

  // Rank 0: appends `tokens` to the output and to the message's tokens, stopping after one that
  // ends generation (an end-of-sequence id, or the last token of the budget); true when one did.
  bool emit(std::span<const std::int32_t> tokens);
  // Rank 0, at the end of a step whose emitted tokens `ended` generation or not: sets the
  // message's flags (end-of-sequence; a stop request, polled here when generation goes on) and
  // returns true when generation stops after this step.
  bool end_step(bool ended);
  bool stopped_on_eos() const { return stopped_on_eos_; }

  // Every rank: receives rank 0's message (a decision without output tokens, e.g. a draft step).
  void broadcast(const KvCache& kv);
  // Every rank: receives rank 0's message; the other ranks append the tokens it emitted.
  void broadcast_tokens(const KvCache& kv);

  // Seconds spent in broadcasts and --debug-sync checks.
  double comm_seconds() const { return comm_seconds_; }

 private:
  void check_sync(const KvCache& kv);

  Communicator& comm_;
  const GenerationOptions& options_;
  const TokenCallback& on_token_;
  ControlMessage message_;
  std::vector<std::int32_t> tokens_;
  bool stopped_on_eos_ = false;
  std::uint64_t step_ = 0;
  double comm_seconds_ = 0.0;
};

}  // namespace selfspec
