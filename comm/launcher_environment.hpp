// What the environment says about how this process was launched, read before anything starts
// MPI: whether mpirun/mpiexec/srun started it as part of an MPI job, and how many tasks the
// launcher started with it. A build with MPI uses it to decide whether to start MPI; a build
// without MPI (the single-rank engine, SELFSPEC_MPI) to refuse a launch of several tasks, which
// would otherwise run as that many independent one-rank copies of the job. Needs no MPI.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace selfspec {

// Reads an environment variable (nullptr when unset); injectable for tests.
using EnvironmentLookup = std::function<const char*(const char* name)>;

// The process environment (std::getenv).
const char* process_environment_variable(const char* name);

// The value of an environment variable holding a count: a whole number > 0, or nullopt (unset,
// empty, not a number, not positive).
std::optional<int> positive_count(const char* text);

// True when the environment says this process was started by mpirun/mpiexec/srun as part of an
// MPI job (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK, ...). A plain `selfspec ...` is not.
bool launched_under_mpi(const EnvironmentLookup& environment = process_environment_variable);

// How many tasks the launcher started together (this one included), and the variable that says
// so: OMPI_COMM_WORLD_SIZE (Open MPI's mpirun), PMI_SIZE (MPICH / Intel MPI, srun --mpi=pmi2),
// MV2_COMM_WORLD_SIZE (MVAPICH), SLURM_STEP_NUM_TASKS (an srun step) or SLURM_NTASKS (the batch
// script of a SLURM job), in that order.
struct LauncherTasks {
  int count = 1;
  std::string variable;
};

// nullopt when no launcher variable holds a positive count (a plain run).
std::optional<LauncherTasks> launcher_tasks(const EnvironmentLookup& environment);

// For a build without MPI: why this process must not run, namely that the launcher started it as
// one of several tasks (each would run the whole job alone), or nullopt (a plain run, one task).
std::optional<std::string> several_tasks_without_mpi(const EnvironmentLookup& environment);

// Throws selfspec::Error with several_tasks_without_mpi's reason for this process, if any.
void check_single_task_launch();

}  // namespace selfspec
