#include "comm/mpi_runtime.hpp"

#include "comm/mpi_check.hpp"
#include "core/process_identity.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace selfspec {
namespace detail {

std::string mpi_error_string(int code) {
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  if (MPI_Error_string(code, text.data(), &length) != MPI_SUCCESS) {
    return "MPI error " + std::to_string(code);
  }
  return std::string(text.data(), static_cast<std::size_t>(length));
}

}  // namespace detail

namespace {
std::atomic<bool> g_active{false};
}  // namespace

bool mpi_built() {
  return true;
}

MpiRuntime::MpiRuntime() {
  int provided = 0;
  SELFSPEC_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
  g_active = true;
  SELFSPEC_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  SELFSPEC_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  SELFSPEC_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));

  MPI_Comm node_comm = MPI_COMM_NULL;
  SELFSPEC_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm));
  ProcessIdentity identity;
  identity.rank = rank_;
  identity.size = size_;
  SELFSPEC_MPI_CHECK(MPI_Comm_rank(node_comm, &identity.local_rank));
  SELFSPEC_MPI_CHECK(MPI_Comm_size(node_comm, &identity.local_size));
  SELFSPEC_MPI_CHECK(MPI_Comm_free(&node_comm));
  std::array<char, MPI_MAX_PROCESSOR_NAME> host{};
  int host_length = 0;
  SELFSPEC_MPI_CHECK(MPI_Get_processor_name(host.data(), &host_length));
  identity.host.assign(host.data(), static_cast<std::size_t>(host_length));
  set_process_identity(std::move(identity));
}

MpiRuntime::~MpiRuntime() {
  g_active = false;
  MPI_Finalize();
}

bool MpiRuntime::active() {
  return g_active;
}

void MpiRuntime::abort_job(int exit_code) {
  if (g_active) {
    std::thread([exit_code] {
      std::this_thread::sleep_for(std::chrono::duration<double>(kAbortGraceSeconds));
      std::fprintf(stderr,
                   "%s error: MPI_Abort has not ended this rank within %.0f s (is the launcher "
                   "unreachable?); exiting with code %d\n",
                   rank_prefix().c_str(), kAbortGraceSeconds, exit_code);
      std::fflush(stderr);
      std::_Exit(exit_code);
    }).detach();
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  std::exit(exit_code);
}

}  // namespace selfspec
