// Stop requests: a real SIGTERM / SIGINT / SIGUSR1 is recorded (not fatal) once the handlers are
// installed, the first signal is the one reported, and the exit status follows the shell's
// 128 + signal convention.
#include "core/stop_request.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <cstring>

namespace selfspec {
namespace {

class StopRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    install_stop_signal_handlers();
    clear_stop_request();
  }
  void TearDown() override { clear_stop_request(); }
};

TEST_F(StopRequestTest, NothingIsRequestedAtFirst) {
  EXPECT_FALSE(stop_requested());
  EXPECT_EQ(stop_signal(), 0);
}

TEST_F(StopRequestTest, ARealSignalIsRecordedInsteadOfEndingTheProcess) {
  for (int signal : {SIGTERM, SIGINT, SIGUSR1}) {
    clear_stop_request();
    ASSERT_EQ(std::raise(signal), 0);
    EXPECT_TRUE(stop_requested()) << signal;
    EXPECT_EQ(stop_signal(), signal);
  }
}

TEST_F(StopRequestTest, TheFirstSignalIsTheOneReported) {
  ASSERT_EQ(std::raise(SIGUSR1), 0);
  ASSERT_EQ(std::raise(SIGTERM), 0);  // a different signal does not overwrite the first
  EXPECT_EQ(stop_signal(), SIGUSR1);
}

TEST_F(StopRequestTest, NamesAndExitCodes) {
  EXPECT_STREQ(stop_signal_name(SIGTERM), "SIGTERM");
  EXPECT_STREQ(stop_signal_name(SIGINT), "SIGINT");
  EXPECT_STREQ(stop_signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(stop_exit_code(SIGTERM), 143);
  EXPECT_EQ(stop_exit_code(SIGINT), 130);
  request_stop(SIGTERM);
  EXPECT_EQ(stop_signal(), SIGTERM);
}

}  // namespace
}  // namespace selfspec
