// The job a `selfspec` command runs in: MPI when started by mpirun/srun (MpiRuntime + MpiComm),
// a single local rank otherwise (always in a build without MPI, which refuses a launch of several
// tasks); the worker-thread count; and the one place that decides to end the job (run_job and
// the handlers installed here):
//   * an error on any rank: "[rank r/n host] error: ..." and, with several ranks, MPI_Abort so
//     that no peer is left blocked in a collective;
//   * a collective past its deadline (a peer died or hung, comm/collective_watchdog.hpp): the
//     message, then the process exits non-zero, and mpirun / srun --kill-on-bad-exit end the rest;
//   * SIGTERM / SIGINT / SIGUSR1 (core/stop_request.hpp): the commands stop at the next step,
//     write what they finished and exit with 128 + signal.
// At start-up it also checks the world against the launcher (launcher_check.hpp).
#pragma once

#include "comm/communicator.hpp"
#include "comm/mpi_runtime.hpp"

#include <functional>
#include <memory>

namespace selfspec::launch {

class Job {
 public:
  // threads <= 0: cores / ranks on this node.
  explicit Job(int threads);
  Communicator& comm() { return *comm_; }
  bool is_root() const { return comm_->is_root(); }

 private:
  std::unique_ptr<MpiRuntime> mpi_;
  std::unique_ptr<Communicator> comm_;
};

// Generation options' interrupt hook: the pending stop signal (0 when none). Polled on rank 0.
int pending_stop_signal();
// Rank 0's pending stop signal on every rank (a broadcast: every rank calls it at the same point),
// so that all ranks stop together; 0 when none.
int agreed_stop_signal(Communicator& comm);

// Runs body(job) and turns any exception into an error exit of the whole job. Returns the exit
// code (body's, or 1 after an error in a single-rank job; multi-rank jobs abort).
int run_job(int threads, const std::function<int(Job&)>& body);

// Runs a command that needs no job (no MPI: info, plan, tokenize, make-model): an exception
// becomes "error: ..." on stderr and exit code 1.
int run_without_job(const std::function<int()>& body);

}  // namespace selfspec::launch
