// The launcher environment: which variables say that mpirun/mpiexec/srun started this process and
// how many tasks they started; a build without MPI refuses a launch of several tasks (each would
// run alone) and accepts plain runs and single tasks. Both flavours run these: nothing here needs
// MPI. The build's own flavour: MpiRuntime and make_world_communicator agree with mpi_built().
#include "comm/launcher_environment.hpp"

#include "comm/communicator.hpp"
#include "comm/mpi_runtime.hpp"
#include "core/error.hpp"

#include "tests/support/fake_environment.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace selfspec {
namespace {

using ::testing::HasSubstr;

using testing::fake_environment;

TEST(LauncherEnvironment, APlainRunIsNoMpiJobAndHasNoTaskCount) {
  EXPECT_FALSE(launched_under_mpi(fake_environment({})));
  EXPECT_FALSE(launcher_tasks(fake_environment({})));
  EXPECT_FALSE(several_tasks_without_mpi(fake_environment({})));
  // SLURM alone (sbatch, salloc) does not make an MPI job.
  EXPECT_FALSE(
      launched_under_mpi(fake_environment({{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "1"}})));
}

TEST(LauncherEnvironment, EachLaunchersVariablesAreRecognised) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                           "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"}) {
    EXPECT_TRUE(launched_under_mpi(fake_environment({{name, "2"}}))) << name;
  }
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE",
                           "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}) {
    const auto tasks = launcher_tasks(fake_environment({{name, "6"}}));
    ASSERT_TRUE(tasks) << name;
    EXPECT_EQ(tasks->count, 6) << name;
    EXPECT_EQ(tasks->variable, name);
  }
  // Not a positive count: ignored.
  EXPECT_FALSE(
      launcher_tasks(fake_environment({{"OMPI_COMM_WORLD_SIZE", "two"}, {"PMI_SIZE", "0"}})));
}

TEST(LauncherEnvironment, TheLaunchersOwnCountWinsOverTheAllocations) {
  // mpirun -np 1 (or srun -n 1) inside an allocation of 16 tasks is one task.
  const auto mpirun = fake_environment(
      {{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "16"}, {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_EQ(launcher_tasks(mpirun)->count, 1);
  EXPECT_FALSE(several_tasks_without_mpi(mpirun));
  const auto step = fake_environment(
      {{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "16"}, {"SLURM_STEP_NUM_TASKS", "1"}});
  EXPECT_EQ(launcher_tasks(step)->variable, "SLURM_STEP_NUM_TASKS");
  EXPECT_FALSE(several_tasks_without_mpi(step));
}

TEST(LauncherEnvironment, WithoutMpiSeveralTasksAreRefusedNamingTheVariable) {
  for (const auto& [name, value] : std::map<std::string, std::string>{{"OMPI_COMM_WORLD_SIZE", "2"},
                                                                      {"PMI_SIZE", "3"},
                                                                      {"SLURM_STEP_NUM_TASKS", "4"},
                                                                      {"SLURM_NTASKS", "8"}}) {
    const auto reason = several_tasks_without_mpi(fake_environment({{name, value}}));
    ASSERT_TRUE(reason) << name;
    EXPECT_THAT(*reason, HasSubstr("built without MPI"));
    EXPECT_THAT(*reason, HasSubstr(name + "=" + value));
    EXPECT_THAT(*reason, HasSubstr("one of " + value + " tasks"));
  }
}

TEST(BuildFlavour, TheWorldCommunicatorAndMpiRuntimeFollowTheBuild) {
  // No MpiRuntime is active in a unit test, in either flavour: the world is this process alone.
  EXPECT_FALSE(MpiRuntime::active());
  EXPECT_EQ(make_world_communicator()->name(), "local");
  EXPECT_EQ(mpi_built(), SELFSPEC_HAVE_MPI != 0);
  if (!mpi_built()) {
    try {
      MpiRuntime runtime;
      ADD_FAILURE() << "a build without MPI constructed an MpiRuntime";
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr("built without MPI"));
    }
  }
}

}  // namespace
}  // namespace selfspec
