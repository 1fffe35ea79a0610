// A draft source that needs no draft forward: from the sequence so far, rank 0 proposes a chain
// of tokens for the round, or nothing. A SourcedDrafter (draft/sourced_drafter.hpp) tries its
// sources in order before the model's own draft, the way llama.cpp's common_speculative tries its
// implementations; the first that proposes drafts the round. Lookup drafts
// (draft/lookup_source.hpp: LLMA §2.2, prompt lookup decoding) are one. A source's tokens are
// deterministic proposals (point masses): greedy verification treats the chain like any other and
// speculative sampling accepts each token with the target's probability of it
// (verify/token_picker.hpp), so the output still follows the target.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace selfspec {

class DraftSource {
 public:
  // The most tokens one proposal holds (the control message's room, with the target's token and
  // the model's own draft steps, is larger).
  static constexpr int kMaxTokens = 32;

  virtual ~DraftSource() = default;
  // How reports name it ("lookup"): the key of its statistics in the drafter's state.
  virtual std::string_view name() const = 0;
  // Rank 0: at most `room` tokens continuing `history` (prompt and output so far), or none.
  virtual std::vector<std::int32_t> propose(std::span<const std::int32_t> history, int room) = 0;
  // Its settings, for reports.
  virtual nlohmann::json settings() const = 0;
};

}  // namespace selfspec
