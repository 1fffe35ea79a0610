// The job a `selfspec` command runs in: MPI when started by mpirun/srun (MpiRuntime + MpiComm),
// a single local rank otherwise; the worker-thread count; and the one place that decides to end
// the job on an error (run_job): it prints "[rank r/n host] error: ..." and, with several ranks,
// calls MPI_Abort so that no peer is left blocked in a collective.
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

// Runs body(job) and turns any exception into an error exit of the whole job. Returns the exit
// code (body's, or 1 after an error in a single-rank job; multi-rank jobs abort).
int run_job(int threads, const std::function<int(Job&)>& body);

// Reports an error from a command that runs no job (no MPI): "error: ..." on stderr, returns 1.
int report_error(const std::exception& error);

}  // namespace selfspec::launch
