#include "bench/comm/bench_job.hpp"

#include "comm/launcher_environment.hpp"
#include "comm/mpi_runtime.hpp"
#include "core/process_identity.hpp"

#include <cstdio>
#include <exception>
#include <optional>

namespace selfspec {

int run_bench_job(const char* name, const std::function<int()>& measure) {
  std::optional<MpiRuntime> mpi;
  try {
    if (!mpi_built()) {
      check_single_task_launch();
    } else if (launched_under_mpi()) {
      mpi.emplace();
    }
    return measure();
  } catch (const std::exception& error) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s %s error: %s\n", rank_prefix().c_str(), name, error.what());
    std::fflush(stderr);
    if (MpiRuntime::active() && process_identity().size > 1) MpiRuntime::abort_job(1);
    return 1;
  }
}

}  // namespace selfspec
