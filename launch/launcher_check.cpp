#include "launch/launcher_check.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace selfspec::launch {

std::optional<std::string> launcher_world_mismatch(int world_size,
                                                   const EnvironmentLookup& environment) {
  if (environment("OMPI_COMM_WORLD_SIZE") != nullptr) return std::nullopt;  // mpirun
  if (environment("SLURM_JOB_ID") == nullptr) return std::nullopt;          // not SLURM
  if (const std::optional<int> step_tasks = positive_count(environment("SLURM_STEP_NUM_TASKS"))) {
    if (*step_tasks == world_size) return std::nullopt;
    return fmt::format(
        "srun started {} tasks (SLURM_STEP_NUM_TASKS={}) but MPI sees a world of {} rank(s): the "
        "tasks did not join one MPI job (each would run alone, all on GPU 0). Launch with "
        "`srun --mpi=pmix ...` (`srun --mpi=list` shows the plugins; Open MPI needs pmix), or "
        "with mpirun",
        *step_tasks, *step_tasks, world_size);
  }
  if (const std::optional<int> tasks = positive_count(environment("SLURM_NTASKS"))) {
    if (*tasks == world_size) return std::nullopt;
    return fmt::format(
        "running as {} rank(s) directly in the batch script of a SLURM job of {} tasks "
        "(SLURM_NTASKS={}): start the ranks with `srun --mpi=pmix selfspec ...` (or "
        "`srun -n 1` for a single-rank run)",
        world_size, *tasks, *tasks);
  }
  return std::nullopt;
}

void check_launcher_world(int world_size) {
  const auto environment = [](const char* name) -> const char* { return std::getenv(name); };
  if (const std::optional<std::string> reason = launcher_world_mismatch(world_size, environment)) {
    fail("{}", *reason);
  }
}

}  // namespace selfspec::launch
