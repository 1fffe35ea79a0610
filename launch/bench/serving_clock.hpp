// The clock of one `selfspec bench-serving` run: when its requests arrive (a seeded Poisson
// process, or all at once) and the hooks of SpeculativeBatch::run that let them in and record,
// on rank 0, when each request's tokens are chosen and when it ends (serving_stats.hpp's
// RequestRecord). Every rank keeps the finished results (on_done runs everywhere); only rank 0's
// times are measured.
#pragma once

#include "decode/speculative_batch.hpp"
#include "launch/bench/serving_stats.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace selfspec::launch {

// n arrival times in seconds from a run's start: with rate > 0 (requests per second) a Poisson
// process, the first at 0 and exponential gaps of mean 1 / rate drawn from a mt19937_64 seeded
// with `seed` (the same schedule on every machine); with rate 0 all at 0.
std::vector<double> poisson_arrivals(std::int64_t n, double rate, std::uint64_t seed);

class ServingClock {
 public:
  using Clock = std::chrono::steady_clock;

  // `arrivals`: one time per request, non-decreasing. `stop_requested` (rank 0): a stop signal is
  // pending; then a wait for the next arrival ends at once.
  ServingClock(std::span<const SpeculativeRequest> requests, std::vector<double> arrivals,
               std::function<bool()> stop_requested);

  // The hooks of one run; the clock starts now. Arrivals are paced only when one is after 0.
  SpeculativeBatch::Hooks start();
  // After the run: its wall time on this rank (from start()).
  double stop();

  // The requests' records in request order (times are rank 0's), and the first stop signal a
  // result carried (0: none).
  std::vector<RequestRecord>& records() { return records_; }
  int interrupt_signal() const { return interrupt_signal_; }

 private:
  double elapsed() const;
  // Rank 0: how many requests have arrived; when idle with nothing waiting, sleeps until the next.
  std::int64_t arrived(bool idle);

  std::vector<double> arrivals_;
  std::function<bool()> stop_requested_;
  std::vector<RequestRecord> records_;
  Clock::time_point start_{};
  std::int64_t done_ = 0;
  int interrupt_signal_ = 0;
};

}  // namespace selfspec::launch
