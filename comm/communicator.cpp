#include "comm/communicator.hpp"

#include "comm/local_comm.hpp"
#include "core/error.hpp"
#if SELFSPEC_HAVE_MPI
#include "comm/mpi_comm.hpp"
#include "comm/mpi_runtime.hpp"
#endif

#include <memory>

namespace selfspec {

void Communicator::all_reduce_sum_device(float* /*data*/, std::size_t /*count*/, void* /*stream*/) {
  throw Error(std::string("the ") + std::string(name()) +
              " communicator works on host memory; device all-reduce needs NCCL");
}

void Communicator::all_gather_bytes_device(const void* /*send*/, void* /*recv*/,
                                           std::size_t /*bytes*/, void* /*stream*/) {
  throw Error(std::string("the ") + std::string(name()) +
              " communicator works on host memory; device all-gather needs NCCL");
}

void Communicator::wait_for_peers(const char* /*what*/, double /*timeout_s*/) {
  barrier();
}

std::unique_ptr<Communicator> make_world_communicator() {
#if SELFSPEC_HAVE_MPI
  if (MpiRuntime::active()) return std::make_unique<MpiComm>();
#endif
  return std::make_unique<LocalComm>();
}

}  // namespace selfspec
