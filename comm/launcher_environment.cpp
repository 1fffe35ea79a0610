#include "comm/launcher_environment.hpp"

#include "core/error.hpp"

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace selfspec {

std::optional<int> positive_count(const char* text) {
  if (text == nullptr) return std::nullopt;
  int value = 0;
  const char* end = text + std::strlen(text);
  const auto [last, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || last != end || value <= 0) return std::nullopt;
  return value;
}

const char* process_environment_variable(const char* name) {
  return std::getenv(name);
}

bool launched_under_mpi(const EnvironmentLookup& environment) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                           "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"}) {
    if (environment(name) != nullptr) return true;
  }
  return false;
}

std::optional<LauncherTasks> launcher_tasks(const EnvironmentLookup& environment) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE",
                           "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}) {
    if (const std::optional<int> count = positive_count(environment(name))) {
      return LauncherTasks{*count, name};
    }
  }
  return std::nullopt;
}

std::optional<std::string> several_tasks_without_mpi(const EnvironmentLookup& environment) {
  const std::optional<LauncherTasks> tasks = launcher_tasks(environment);
  if (!tasks || tasks->count == 1) return std::nullopt;
  return fmt::format(
      "this selfspec was built without MPI (SELFSPEC_MPI=OFF, or CMake found no MPI) and runs a "
      "single rank, but it was launched as one of {} tasks ({}={}): each would run the whole job "
      "alone. Start one process (no launcher, or -np 1 / srun -n 1), or rebuild with MPI "
      "(Debian: libopenmpi-dev openmpi-bin) for multi-rank jobs",
      tasks->count, tasks->variable, tasks->count);
}

void check_single_task_launch() {
  if (const std::optional<std::string> reason =
          several_tasks_without_mpi(process_environment_variable)) {
    fail("{}", *reason);
  }
}

}  // namespace selfspec
