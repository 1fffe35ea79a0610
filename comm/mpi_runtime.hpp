// MPI's lifetime as an RAII object (MPI_Init_thread in the constructor, MPI_Finalize in the
// destructor), whether this build has MPI at all, and the job-wide abort that launch/ uses so
// that no peer is left blocked. Whether this process is part of an MPI job is the launcher
// environment's to say (comm/launcher_environment.hpp).
// This header does not include mpi.h, and is the same in both flavours: in a build without MPI
// (SELFSPEC_MPI, CMakeLists.txt) no_mpi_runtime.cpp implements it, mpi_built() is false and
// nothing may construct an MpiRuntime.
#pragma once

namespace selfspec {

// True in a build with MPI (mpi_runtime.cpp), false in the single-rank one (no_mpi_runtime.cpp).
bool mpi_built();

class MpiRuntime {
 public:
  // Initialises MPI (thread level FUNNELED) with errors returned rather than fatal, so failures
  // become selfspec::Error. Sets process_identity() (rank, size, local rank, host). Throws
  // selfspec::Error in a build without MPI.
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // True between construction and destruction of an MpiRuntime (never without MPI).
  static bool active();
  static constexpr double kAbortGraceSeconds = 3.0;
  // Ends every rank of the job with the given exit code (MPI_Abort). Never returns: MPI_Abort
  // can block when the runtime cannot reach the launcher or a peer node (a cut link, a crashed
  // node), so this process ends itself with the exit code after kAbortGraceSeconds if MPI_Abort
  // has not ended it by then; the launcher then sees a failed rank and ends the others.
  [[noreturn]] static void abort_job(int exit_code);

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace selfspec
