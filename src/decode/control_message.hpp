// Rank 0's decisions, broadcast to every rank as one fixed-size message per decision
// (docs/ARCHITECTURE.md, "The rank-0 protocol"). Ranks other than 0 never branch on their own
// floating-point data: they only obey these messages, so every rank runs the identical sequence of
// forward passes and collectives.
#pragma once

#include "control/draft_length_controller.hpp"

#include "model/layer_plan.hpp"

#include <array>
#include <cstdint>
#include <type_traits>

namespace selfspec {

enum class ControlCommand : std::uint32_t {
  kStop = 2,    // generation is over; tokens holds the final tokens (possibly none)
  kDraft = 3,   // run a draft forward with the skip mask in the message
  kVerify = 4,  // run the verification forward over the drafted tokens (none: plain decoding)
};

// ControlMessage::flags.
inline constexpr std::uint32_t kFlagEos = 1u;  // the message's last token is an end-of-sequence id
// Generation was stopped on request (a stop signal on rank 0); the signal is in bits 8-15.
inline constexpr std::uint32_t kFlagInterrupted = 2u;
inline constexpr std::uint32_t interrupted_flags(int signal) {
  return kFlagInterrupted | (static_cast<std::uint32_t>(signal & 0xff) << 8);
}
inline constexpr int interrupt_signal_of(std::uint32_t flags) {
  return (flags & kFlagInterrupted) != 0 ? static_cast<int>((flags >> 8) & 0xff) : 0;
}

struct ControlMessage {
  // The drafts of a round (at most kMaxDraftTokens, the one draft limit) and the target's token.
  static constexpr int kMaxTokens = kMaxDraftTokens + 1;

  std::uint64_t step = 0;
  ControlCommand command = ControlCommand::kVerify;
  std::uint32_t n_tokens = 0;
  std::uint32_t accepted = 0;
  std::uint32_t flags = 0;
  std::int32_t exit_layer = -1;
  std::int32_t reserved = 0;
  std::array<std::int32_t, kMaxTokens> tokens{};
  std::array<std::uint64_t, LayerPlan::kMaskWords> skip_mask{};  // LayerPlan wire form

  // A checksum of the whole message (FNV-1a over its bytes), for --debug-sync.
  std::uint64_t checksum() const;
};

static_assert(std::is_trivially_copyable_v<ControlMessage>);
static_assert(std::has_unique_object_representations_v<ControlMessage>,
              "no padding: the message is broadcast and checksummed as raw bytes");

}  // namespace selfspec
