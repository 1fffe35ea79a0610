// A deadline for blocking collectives. MPI's blocking collectives wait forever for a peer that has
// hung (stopped, deadlocked, stuck in I/O); a thread cannot be interrupted inside MPI_Allgather.
// The watchdog thread watches the collective in flight (armed by a Scope around the MPI call) and,
// when it has waited longer than its deadline, calls the expiry handler with a message naming the
// collective, the wait and the rank. launch/ installs the handler that ends the process with a
// non-zero exit, which makes mpirun (and `srun --kill-on-bad-exit`) end every rank of the job;
// every rank runs its own watchdog, so the job ends within the deadline even without the launcher.
//
// The deadline: SELFSPEC_COMM_TIMEOUT_S seconds (default 600) for ordinary collectives; a Scope
// may give its own (the barrier after loading weights waits up to SELFSPEC_LOAD_TIMEOUT_S,
// default 3600, because ranks load their shards at different speeds).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace selfspec {

inline constexpr double kDefaultCommTimeoutSeconds = 600.0;
inline constexpr double kDefaultLoadTimeoutSeconds = 3600.0;
inline constexpr const char* kCommTimeoutVariable = "SELFSPEC_COMM_TIMEOUT_S";
inline constexpr const char* kLoadTimeoutVariable = "SELFSPEC_LOAD_TIMEOUT_S";

// A positive number of seconds from the environment variable `name`, or `fallback` when unset.
// Throws selfspec::Error naming the variable for anything else.
double timeout_seconds_from_environment(const char* name, double fallback);

class CollectiveWatchdog {
 public:
  using ExpiryHandler = std::function<void(const std::string& message)>;

  // The process-wide handler every watchdog calls (launch/ installs one that ends the process).
  // Default: print the message to stderr and std::_Exit(1).
  static void set_expiry_handler(ExpiryHandler handler);

  explicit CollectiveWatchdog(double timeout_s);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  double timeout_seconds() const { return timeout_s_; }

  // Arms the watchdog for one collective (`what` must outlive the scope: a string literal).
  class Scope {
   public:
    Scope(CollectiveWatchdog& watchdog, const char* what, double timeout_s);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CollectiveWatchdog& watchdog_;
  };
  Scope watch(const char* what) { return Scope(*this, what, timeout_s_); }
  Scope watch(const char* what, double timeout_s) { return Scope(*this, what, timeout_s); }

 private:
  void run();

  const double timeout_s_;
  // The collective in flight: its name, its start (steady clock, ns) and deadline; 0 = none.
  std::atomic<const char*> what_{nullptr};
  std::atomic<std::int64_t> started_ns_{0};
  std::atomic<std::int64_t> deadline_ns_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace selfspec
