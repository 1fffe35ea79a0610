#include "decode/phase_timer.hpp"

namespace selfspec {

PhaseTimer::PhaseTimer(const LlamaModel& model, const TokenPicker& picker,
                       const Rank0Channel& channel)
    : model_(model),
      picker_(picker),
      channel_(channel),
      comm_at_start_(comm_now()),
      rounds_start_(Clock::now()) {}

double PhaseTimer::seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double PhaseTimer::comm_now() const {
  return model_.counters().comm_seconds + picker_.comm_seconds() + channel_.comm_seconds();
}

void PhaseTimer::start_rounds() {
  rounds_start_ = Clock::now();
  comm_at_rounds_ = comm_now();
  phases_ = {};
  draft_forward_s_ = 0.0;
  verify_forward_s_ = 0.0;
}

double PhaseTimer::rounds_seconds() const {
  return seconds_since(rounds_start_);
}

void PhaseTimer::book_forward(Forward kind, double wall, double comm) {
  if (kind == Forward::kDraft) {
    draft_forward_s_ += wall;
    phases_.draft_s += wall - comm;
  } else {
    verify_forward_s_ += wall;
    phases_.verify_s += wall - comm;
  }
}

void PhaseTimer::finish(DecodingStats& stats) const {
  stats.phases = phases_;
  stats.phases.comm_s = comm_now() - comm_at_rounds_;
  stats.draft_forward_s = draft_forward_s_;
  stats.verify_forward_s = verify_forward_s_;
}

}  // namespace selfspec
