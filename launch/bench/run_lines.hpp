// Which of bench's runs get their lines on stderr: at most one run's (its autoregressive line
// and its speculative configurations' lines) per kSeconds, besides the first and the last run.
// A small model finishes hundreds of runs a second and --out-jsonl holds every one. Lines
// printed faster than the launcher drains them would also fill its pipe: mpirun stops reading
// its ranks' output once it is signalled, and a rank blocked writing a line could not reach the
// stop it must obey.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <string>

namespace selfspec::launch {

class RunLines {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr double kSeconds = 1.0;

  // Decides whether run `run` (0-based) of `runs` gets its lines; call once per run, first.
  void start_run(int run, int runs, Clock::time_point now = Clock::now()) {
    shown_ = run == 0 || run + 1 == runs ||
             std::chrono::duration<double>(now - last_shown_).count() >= kSeconds;
    if (!shown_) {
      ++hidden_;
      return;
    }
    last_shown_ = now;
    hidden_before_ = hidden_;
    hidden_ = 0;
  }
  bool shown() const { return shown_; }
  // " (N runs since the last line)" when runs went without lines since the last shown one.
  std::string hidden_note() const {
    return hidden_before_ == 0 ? std::string()
                               : fmt::format(" ({} runs since the last line)", hidden_before_);
  }

 private:
  Clock::time_point last_shown_{};
  bool shown_ = true;
  int hidden_ = 0;
  int hidden_before_ = 0;
};

}  // namespace selfspec::launch
