// The launcher check catches the silent singleton start (srun without a PMI plugin: N one-rank
// jobs) and a single process in a multi-task batch script, and leaves mpirun, plain runs and
// matching SLURM steps alone.
#include "launch/launcher_check.hpp"

#include "tests/support/fake_environment.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace selfspec::launch {
namespace {

using ::testing::HasSubstr;

using testing::fake_environment;

TEST(LauncherCheck, OutsideSlurmNothingIsChecked) {
  EXPECT_FALSE(launcher_world_mismatch(1, fake_environment({})));
  EXPECT_FALSE(launcher_world_mismatch(4, fake_environment({{"OMPI_COMM_WORLD_SIZE", "4"}})));
}

TEST(LauncherCheck, AnSrunStepMustFormOneWorldOfAllItsTasks) {
  const auto step = fake_environment({{"SLURM_JOB_ID", "7"},
                                      {"SLURM_NTASKS", "8"},
                                      {"SLURM_STEP_NUM_TASKS", "8"},
                                      {"SLURM_PROCID", "3"}});
  EXPECT_FALSE(launcher_world_mismatch(8, step));
  const auto singleton = launcher_world_mismatch(1, step);
  ASSERT_TRUE(singleton);
  EXPECT_THAT(*singleton, HasSubstr("SLURM_STEP_NUM_TASKS=8"));
  EXPECT_THAT(*singleton, HasSubstr("--mpi=pmix"));
  // A step smaller than the allocation is fine when the world matches the step.
  EXPECT_FALSE(launcher_world_mismatch(
      2, fake_environment(
             {{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NUM_TASKS", "2"}})));
}

TEST(LauncherCheck, ASingleProcessInAMultiTaskBatchScriptIsCaught) {
  const auto batch = fake_environment({{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "16"}});
  const auto reason = launcher_world_mismatch(1, batch);
  ASSERT_TRUE(reason);
  EXPECT_THAT(*reason, HasSubstr("SLURM_NTASKS=16"));
  EXPECT_THAT(*reason, HasSubstr("srun"));
  EXPECT_FALSE(
      launcher_world_mismatch(1, fake_environment({{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "1"}})));
}

TEST(LauncherCheck, MpirunInsideAnAllocationChoosesItsOwnWorld) {
  EXPECT_FALSE(launcher_world_mismatch(
      4, fake_environment(
             {{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "16"}, {"OMPI_COMM_WORLD_SIZE", "4"}})));
}

}  // namespace
}  // namespace selfspec::launch
