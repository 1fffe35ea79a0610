// main() for GoogleTest binaries run under mpirun: initialises MPI, lets only rank 0 print the
// usual report (other ranks print their failures with a rank prefix), and makes every rank exit
// non-zero when any rank had a failure, so mpirun reports the failure whichever rank saw it.
#include "comm/mpi_comm.hpp"
#include "comm/mpi_runtime.hpp"
#include "core/process_identity.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "%s %s:%d: failure\n%s\n", selfspec::rank_prefix().c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  selfspec::MpiRuntime mpi;
  if (mpi.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    // Release hands the default printer back to us (dropped here); Append takes ownership.
    std::unique_ptr<::testing::TestEventListener>(
        listeners.Release(listeners.default_result_printer()));
    listeners.Append(std::make_unique<RankFailurePrinter>().release());
  }
  const int local = RUN_ALL_TESTS();
  selfspec::MpiComm comm;
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.all_gather_u64(static_cast<std::uint64_t>(local != 0), all);
  int failed_ranks = 0;
  for (std::uint64_t f : all) failed_ranks += static_cast<int>(f);
  if (mpi.rank() == 0 && failed_ranks > 0) {
    std::fprintf(stderr, "%d of %d ranks had failures\n", failed_ranks, comm.size());
  }
  return failed_ranks > 0 ? 1 : 0;
}
