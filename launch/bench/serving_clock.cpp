// The clock of one `selfspec bench-serving` run: see serving_clock.hpp.
#include "launch/bench/serving_clock.hpp"

#include "core/error.hpp"

#include <boost/random/exponential_distribution.hpp>
#include <boost/random/mersenne_twister.hpp>

#include <algorithm>
#include <thread>

namespace selfspec::launch {

std::vector<double> poisson_arrivals(std::int64_t n, double rate, std::uint64_t seed) {
  SELFSPEC_CHECK(rate >= 0.0, "--rate: {} requests per second < 0 (0: all arrive at once)", rate);
  std::vector<double> arrivals(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)), 0.0);
  if (rate == 0.0) return arrivals;
  boost::random::mt19937_64 rng(seed);
  boost::random::exponential_distribution<double> gap(rate);
  for (std::size_t i = 1; i < arrivals.size(); ++i) arrivals[i] = arrivals[i - 1] + gap(rng);
  return arrivals;
}

ServingClock::ServingClock(std::span<const SpeculativeRequest> requests,
                           std::vector<double> arrivals, std::function<bool()> stop_requested)
    : arrivals_(std::move(arrivals)), stop_requested_(std::move(stop_requested)) {
  SELFSPEC_CHECK(arrivals_.size() == requests.size(), "{} arrival times for {} requests",
                 arrivals_.size(), requests.size());
  for (std::size_t r = 0; r < requests.size(); ++r) {
    RequestRecord record;
    record.request = static_cast<std::int64_t>(r);
    record.prompt_tokens = static_cast<std::int64_t>(requests[r].prompt.size());
    record.arrival_s = arrivals_[r];
    records_.push_back(std::move(record));
  }
}

double ServingClock::elapsed() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

std::int64_t ServingClock::arrived(bool idle) {
  const auto count_at = [&](double t) {
    return static_cast<std::int64_t>(std::upper_bound(arrivals_.begin(), arrivals_.end(), t) -
                                     arrivals_.begin());
  };
  const auto total = static_cast<std::int64_t>(arrivals_.size());
  std::int64_t count = count_at(elapsed());
  // Idle: every request let in so far has ended. Wait for the next one, in short sleeps so that a
  // stop signal is obeyed at once (the next request then stops at its first check).
  while (idle && count == done_ && count < total) {
    if (stop_requested_ && stop_requested_()) return count + 1;
    const double wait = arrivals_[static_cast<std::size_t>(count)] - elapsed();
    if (wait > 0.0)
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, 0.05)));
    count = count_at(elapsed());
  }
  return count;
}

SpeculativeBatch::Hooks ServingClock::start() {
  start_ = Clock::now();
  done_ = 0;
  SpeculativeBatch::Hooks hooks;
  if (std::any_of(arrivals_.begin(), arrivals_.end(), [](double t) { return t > 0.0; })) {
    hooks.arrived = [this](bool idle) { return arrived(idle); };
  }
  hooks.on_token = [this](std::int64_t request, std::int32_t) {
    records_[static_cast<std::size_t>(request)].token_s.push_back(elapsed());
  };
  hooks.on_done = [this](std::int64_t request, GenerationResult&& result) {
    RequestRecord& record = records_[static_cast<std::size_t>(request)];
    record.end_s = elapsed();
    record.tokens = std::move(result.tokens);
    record.stats = result.stats;
    record.stopped_on_eos = result.stopped_on_eos;
    if (interrupt_signal_ == 0) interrupt_signal_ = result.interrupt_signal;
    ++done_;
  };
  return hooks;
}

double ServingClock::stop() {
  return elapsed();
}

}  // namespace selfspec::launch
