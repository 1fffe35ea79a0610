#include "launch/job.hpp"

#include "comm/collective_watchdog.hpp"
#include "comm/launcher_environment.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/process_identity.hpp"
#include "core/stop_request.hpp"
#include "launch/launcher_check.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace selfspec::launch {

namespace {

// A collective waited past its deadline: a peer is dead or stopped, and this thread cannot be
// freed from inside MPI. End this process with an error; the launcher ends the others (each of
// which has its own watchdog as well).
void end_process_on_hung_collective(const std::string& message) {
  std::fflush(stdout);
  fmt::print(stderr, "{} error: {}\n", rank_prefix(), message);
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace

int pending_stop_signal() {
  return stop_signal();
}

int agreed_stop_signal(Communicator& comm) {
  int signal = comm.is_root() ? pending_stop_signal() : 0;
  comm.broadcast_object(signal, 0);
  return signal;
}

Job::Job(int threads) {
  install_stop_signal_handlers();
  CollectiveWatchdog::set_expiry_handler(end_process_on_hung_collective);
  if (!mpi_built()) {
    // Without MPI a launcher's tasks cannot form one job: refuse rather than run them as copies.
    check_single_task_launch();
  } else if (launched_under_mpi()) {
    mpi_ = std::make_unique<MpiRuntime>();
  }
  comm_ = make_world_communicator();
  check_launcher_world(comm_->size());
  const int local_ranks = process_identity().local_size;
  set_num_threads(threads > 0 ? threads : default_num_threads(local_ranks));
}

int run_without_job(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", error.what());
    std::fflush(stderr);
    return 1;
  }
}

int run_job(int threads, const std::function<int(Job&)>& body) {
  std::unique_ptr<Job> job;
  try {
    job = std::make_unique<Job>(threads);
    return body(*job);
  } catch (const std::exception& error) {
    std::fflush(stdout);
    const ProcessIdentity& id = process_identity();
    if (id.size > 1) {
      fmt::print(stderr, "{} error: {}\n", rank_prefix(), error.what());
    } else {
      fmt::print(stderr, "error: {}\n", error.what());
    }
    std::fflush(stderr);
    // End every rank: a peer may be waiting in a collective this rank will never join.
    if (MpiRuntime::active() && id.size > 1) MpiRuntime::abort_job(1);
    return 1;
  }
}

}  // namespace selfspec::launch
