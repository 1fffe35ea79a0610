// MPI's lifetime as an RAII object (MPI_Init_thread in the constructor, MPI_Finalize in the
// destructor), the launcher-environment probe that decides whether this process is part of an
// MPI job, and the job-wide abort that launch/ uses so that no peer is left blocked.
// This header does not include mpi.h.
#pragma once

namespace selfspec {

// True when the environment says this process was started by mpirun/mpiexec/srun as part of an
// MPI job (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK, ...). A plain `selfspec ...` is not.
bool launched_under_mpi();

class MpiRuntime {
 public:
  // Initialises MPI (thread level FUNNELED) with errors returned rather than fatal, so failures
  // become selfspec::Error. Sets process_identity() (rank, size, local rank, host).
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // True between construction and destruction of an MpiRuntime.
  static bool active();
  // Ends every rank of the job with the given exit code (MPI_Abort). Never returns.
  [[noreturn]] static void abort_job(int exit_code);

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace selfspec
