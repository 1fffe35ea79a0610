// Start-up check against the launcher: under SLURM the job's MPI world must be as large as SLURM
// says. The classic silent failure is `srun -n 8 selfspec ...` without a working PMI plugin: every
// task starts as its own one-rank MPI singleton, all of them on GPU 0, and each happily generates
// alone. We compare the MPI world size with SLURM_STEP_NUM_TASKS (inside an srun step) or
// SLURM_NTASKS (a process run directly in the batch script of a multi-task job). Processes started
// by mpirun are exempt: mpirun sets the world size itself and may use part of an allocation.
// (A build without MPI refuses any launch of several tasks before this: launch/job.cpp.)
#pragma once

#include "comm/launcher_environment.hpp"

#include <optional>
#include <string>

namespace selfspec::launch {

// The reason the world size does not match the launcher's task count, or nullopt when it does
// (or when this is not a SLURM job).
std::optional<std::string> launcher_world_mismatch(int world_size,
                                                   const EnvironmentLookup& environment);

// Throws selfspec::Error with the reason when launcher_world_mismatch finds one.
void check_launcher_world(int world_size);

}  // namespace selfspec::launch
