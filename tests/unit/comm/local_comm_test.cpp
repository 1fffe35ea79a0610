// The single-rank communicator.
#include "comm/local_comm.hpp"
#include "core/error.hpp"

#include <gtest/gtest.h>

namespace selfspec {
namespace {

TEST(LocalComm, CollectivesAreIdentity) {
  LocalComm comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  std::vector<float> data = {1.5f, -2.0f};
  comm.all_reduce_sum(data);
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f}));
  std::vector<float> out(2);
  const std::vector<std::int64_t> counts = {2};
  comm.gather(data, out, counts, 0);
  EXPECT_EQ(out, data);
  std::uint64_t values[1];
  comm.all_gather_u64(7, values);
  EXPECT_EQ(values[0], 7u);
  EXPECT_THROW(comm.gather(data, out, counts, 1), Error);
}

}  // namespace
}  // namespace selfspec
