// --tp and the build's flavour: a build without MPI runs a single rank, so it refuses --tp N > 1
// naming the option, the cause and the way out; a build with MPI leaves --tp to the engine
// (which checks it against the job's world). The refusal is checked for both flavours here; the
// binary's own refusal runs in launch_cli_test in a build without MPI.
#include "comm/mpi_runtime.hpp"
#include "core/error.hpp"
#include "launch/options.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace selfspec::launch {
namespace {

using ::testing::HasSubstr;

TEST(TpOption, WithoutMpiOnlyOneRankIsAvailable) {
  for (const int tp : {0, 1}) EXPECT_FALSE(tp_unavailable_reason(tp, /*mpi_built=*/false)) << tp;
  const auto reason = tp_unavailable_reason(4, /*mpi_built=*/false);
  ASSERT_TRUE(reason);
  EXPECT_THAT(*reason, HasSubstr("--tp 4"));
  EXPECT_THAT(*reason, HasSubstr("built without MPI"));
  EXPECT_THAT(*reason, HasSubstr("--tp 1"));
}

TEST(TpOption, WithMpiEveryDegreeIsTheEnginesToCheck) {
  for (const int tp : {0, 1, 2, 8})
    EXPECT_FALSE(tp_unavailable_reason(tp, /*mpi_built=*/true)) << tp;
}

TEST(TpOption, EngineOptionsRefuseWhatThisBuildCannotRun) {
  EngineCliOptions options;
  options.tp = 2;
  if (mpi_built()) {
    EXPECT_EQ(options.engine_options().expected_tp, 2);
  } else {
    EXPECT_THROW(options.engine_options(), Error);
  }
  options.tp = 1;
  EXPECT_EQ(options.engine_options().expected_tp, 1);
}

}  // namespace
}  // namespace selfspec::launch
