// MpiRuntime in a build without MPI (SELFSPEC_MPI=OFF, or CMake found no MPI): the single-rank
// engine. mpi_built() is false, so launch/ and nccl_bench never start MPI: they refuse a launch of
// several tasks instead (launcher_environment.hpp), and make_world_communicator gives a LocalComm.
// The constructor refuses too, should anything else try.
#include "comm/mpi_runtime.hpp"

#include "core/error.hpp"

#include <cstdlib>

namespace selfspec {

bool mpi_built() {
  return false;
}

MpiRuntime::MpiRuntime() {
  fail(
      "MPI: this selfspec was built without MPI (SELFSPEC_MPI=OFF, or CMake found no MPI); "
      "rebuild with MPI (Debian: libopenmpi-dev openmpi-bin) for multi-rank jobs");
}

MpiRuntime::~MpiRuntime() = default;

bool MpiRuntime::active() {
  return false;
}

void MpiRuntime::abort_job(int exit_code) {
  std::exit(exit_code);
}

}  // namespace selfspec
