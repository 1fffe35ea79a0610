// Where the decoding loop's time goes (PhaseTimes): draft forwards, verification forwards, rank-0
// control (token picking, controller, drafter, bookkeeping) and communication. Collectives are
// counted by their owners — the model (activation all-reduces), the token picker (logit
// exchanges) and the rank-0 channel (control messages) — so a phase's time is its wall time minus
// the collectives inside it, and comm is the owners' counters over the rounds.
#pragma once

#include "decode/generation_result.hpp"
#include "decode/rank0_channel.hpp"
#include "model/llama_model.hpp"
#include "verify/token_picker.hpp"

#include <chrono>
#include <utility>

namespace selfspec {

class PhaseTimer {
 public:
  enum class Forward { kDraft, kVerify };

  PhaseTimer(const LlamaModel& model, const TokenPicker& picker, const Rank0Channel& channel);

  // Marks the start of the rounds (after the first token).
  void start_rounds();
  // Seconds since start_rounds().
  double rounds_seconds() const;

  // Runs a forward pass of the given kind and books it.
  template <typename Body>
  void forward(Forward kind, Body&& body) {
    const double comm = model_.counters().comm_seconds;
    const auto start = Clock::now();
    std::forward<Body>(body)();
    book_forward(kind, seconds_since(start), model_.counters().comm_seconds - comm);
  }
  // Runs rank-0 decisions (and the logit exchanges they need) and books them as control.
  template <typename Body>
  void control(Body&& body) {
    const double comm = picker_.comm_seconds();
    const auto start = Clock::now();
    std::forward<Body>(body)();
    phases_.control_s += seconds_since(start) - (picker_.comm_seconds() - comm);
  }

  // The phases of the rounds, comm included, and the forwards' wall times into `stats`.
  void finish(DecodingStats& stats) const;
  // Seconds of communication since the timer was made (the whole run: model, picker, channel).
  double run_comm_seconds() const { return comm_now() - comm_at_start_; }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point start);
  void book_forward(Forward kind, double wall, double comm);
  double comm_now() const;

  const LlamaModel& model_;
  const TokenPicker& picker_;
  const Rank0Channel& channel_;
  double comm_at_start_ = 0.0;
  Clock::time_point rounds_start_;
  double comm_at_rounds_ = 0.0;
  PhaseTimes phases_;
  double draft_forward_s_ = 0.0;
  double verify_forward_s_ = 0.0;
};

}  // namespace selfspec
