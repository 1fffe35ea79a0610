// Rank 0's tap on the final hidden states, which a draft-length controller that predicts from
// them registers (DraftLengthController::uses_hidden_states: Cali-TS, EESD §3.3 eq. 5). The loop
// asks the tap for each forward's observer; the tap keeps that forward's final-norm rows (only
// those reach the host on a device backend: observe_only) and, once a round's root is known, the
// target's hidden state there.
#pragma once

#include "model/llama_model.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace selfspec {

class HiddenStateTap {
 public:
  explicit HiddenStateTap(std::int64_t hidden_size);
  HiddenStateTap(const HiddenStateTap&) = delete;
  HiddenStateTap& operator=(const HiddenStateTap&) = delete;

  // What the tapped forwards let through to the host: the final norm's output alone.
  static std::span<const std::string_view> names() { return kNames; }
  // The observer of the next forward, whose final-norm rows replace the last forward's (so a
  // forward that observes nothing leaves no stale rows to be read).
  const ForwardObserver* next();
  // The same, also passing every intermediate to `other` (a drafter's prefill observer; may be
  // null), for one forward.
  const ForwardObserver* next_with(const ForwardObserver* other);
  // Row `row` of the last tapped forward's final hidden states.
  std::span<const float> row(std::int64_t row) const;
  // The round's root: the target's hidden state at row `row` of the last tapped forward (the row
  // whose logits gave the last verified token).
  void set_root(std::int64_t row);
  std::span<const float> root() const { return root_; }

 private:
  static constexpr std::array<std::string_view, 1> kNames = {"final_norm"};

  std::int64_t hidden_size_;
  ForwardObserver keep_;
  ForwardObserver both_;
  const ForwardObserver* other_ = nullptr;
  std::vector<float> rows_;  // the last tapped forward's final-norm rows, row-major
  std::vector<float> root_;
};

}  // namespace selfspec
