#include "core/stop_request.hpp"

#include <atomic>
#include <csignal>
#include <cstring>

namespace selfspec {
namespace {

static_assert(std::atomic<int>::is_always_lock_free, "the signal handler stores into an atomic");
std::atomic<int> g_signal{0};
std::atomic<bool> g_installed{false};

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1};

extern "C" void on_stop_signal(int signal) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, signal) && expected == signal) {
    // The same signal again: the user (or the scheduler) insists. Default action, now.
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

}  // namespace

void install_stop_signal_handlers() {
  if (g_installed.exchange(true)) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking reads/writes resume; the loop polls the flag
  for (int signal : kSignals) sigaction(signal, &action, nullptr);
}

bool stop_requested() {
  return g_signal.load(std::memory_order_relaxed) != 0;
}

int stop_signal() {
  return g_signal.load(std::memory_order_relaxed);
}

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "signal";
  }
}

void request_stop(int signal) {
  g_signal.store(signal);
}

void clear_stop_request() {
  g_signal.store(0);
}

int stop_exit_code(int signal) {
  return 128 + (signal > 0 ? signal : SIGTERM);
}

}  // namespace selfspec
