#include "comm/communicator.hpp"

#include "comm/local_comm.hpp"
#include "comm/mpi_comm.hpp"
#include "comm/mpi_runtime.hpp"

#include <memory>

namespace selfspec {

std::unique_ptr<Communicator> make_world_communicator() {
  if (MpiRuntime::active()) return std::make_unique<MpiComm>();
  return std::make_unique<LocalComm>();
}

}  // namespace selfspec
