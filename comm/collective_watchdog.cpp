#include "comm/collective_watchdog.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace selfspec {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::mutex g_handler_mutex;
CollectiveWatchdog::ExpiryHandler& handler_storage() {
  static CollectiveWatchdog::ExpiryHandler handler = [](const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  };
  return handler;
}

}  // namespace

double timeout_seconds_from_environment(const char* name, double fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || text[0] == '\0') return fallback;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(value) || value <= 0.0) {
    fail("{}='{}' is not a positive number of seconds", name, text);
  }
  return value;
}

void CollectiveWatchdog::set_expiry_handler(ExpiryHandler handler) {
  const std::lock_guard lock(g_handler_mutex);
  handler_storage() = std::move(handler);
}

CollectiveWatchdog::CollectiveWatchdog(double timeout_s) : timeout_s_(timeout_s) {
  SELFSPEC_CHECK(std::isfinite(timeout_s) && timeout_s > 0.0,
                 "collective watchdog: the timeout must be a positive number of seconds (got {})",
                 timeout_s);
  thread_ = std::thread([this] { run(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

CollectiveWatchdog::Scope::Scope(CollectiveWatchdog& watchdog, const char* what, double timeout_s)
    : watchdog_(watchdog) {
  const std::int64_t start = now_ns();
  watchdog_.what_.store(what, std::memory_order_relaxed);
  watchdog_.started_ns_.store(start, std::memory_order_relaxed);
  watchdog_.deadline_ns_.store(start + static_cast<std::int64_t>(timeout_s * 1e9),
                               std::memory_order_release);
}

CollectiveWatchdog::Scope::~Scope() {
  watchdog_.deadline_ns_.store(0, std::memory_order_release);
}

void CollectiveWatchdog::run() {
  // Checks a few times per second (or per tenth of a short deadline): the cost is one atomic load.
  const auto period = std::chrono::duration<double>(std::min(0.25, timeout_s_ / 10.0));
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const std::int64_t deadline = deadline_ns_.load(std::memory_order_acquire);
    if (deadline == 0 || now_ns() < deadline) continue;
    const char* what = what_.load(std::memory_order_relaxed);
    const double waited = static_cast<double>(now_ns() - started_ns_.load()) / 1e9;
    const std::string message = fmt::format(
        "collective '{}' has waited {:.1f} s for the other ranks (deadline {:.0f} s, set by {}; "
        "after loading weights by {}): a rank has died or hung; ending this rank so that the "
        "launcher ends the job",
        what != nullptr ? what : "?", waited,
        static_cast<double>(deadline - started_ns_.load()) / 1e9, kCommTimeoutVariable,
        kLoadTimeoutVariable);
    ExpiryHandler handler;
    {
      const std::lock_guard handler_lock(g_handler_mutex);
      handler = handler_storage();
    }
    // Report once per collective (a test's handler returns); a newer collective keeps its own.
    std::int64_t expected = deadline;
    deadline_ns_.compare_exchange_strong(expected, 0);
    lock.unlock();
    handler(message);
    lock.lock();
  }
}

}  // namespace selfspec
