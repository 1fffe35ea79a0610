// CollectiveWatchdog: a collective that outlives its deadline is reported (with its name) exactly
// once; one that finishes in time never is; deadlines come from the environment, checked.
#include "comm/collective_watchdog.hpp"
#include "core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace selfspec {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class WatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CollectiveWatchdog::set_expiry_handler([this](const std::string& message) {
      const std::lock_guard lock(mutex_);
      messages_.push_back(message);
    });
  }
  void TearDown() override {
    CollectiveWatchdog::set_expiry_handler([](const std::string&) { std::abort(); });
  }
  std::vector<std::string> messages() {
    const std::lock_guard lock(mutex_);
    return messages_;
  }

  std::mutex mutex_;
  std::vector<std::string> messages_;
};

TEST_F(WatchdogTest, ReportsACollectiveThatOutlivesItsDeadlineOnce) {
  CollectiveWatchdog watchdog(0.2);
  {
    const CollectiveWatchdog::Scope scope = watchdog.watch("all_reduce_sum");
    std::this_thread::sleep_for(800ms);  // four deadlines: still one report
  }
  const std::vector<std::string> reports = messages();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_THAT(reports[0], HasSubstr("all_reduce_sum"));
  EXPECT_THAT(reports[0], HasSubstr("SELFSPEC_COMM_TIMEOUT_S"));
}

TEST_F(WatchdogTest, CollectivesThatFinishInTimeAreNeverReported) {
  CollectiveWatchdog watchdog(0.3);
  for (int i = 0; i < 50; ++i) {
    const CollectiveWatchdog::Scope scope = watchdog.watch("broadcast");
    std::this_thread::sleep_for(10ms);  // together 0.5 s > deadline, each far below it
  }
  std::this_thread::sleep_for(400ms);  // idle: nothing armed
  EXPECT_TRUE(messages().empty());
}

TEST_F(WatchdogTest, AScopeMayCarryItsOwnLongerDeadline) {
  CollectiveWatchdog watchdog(0.1);
  {
    const CollectiveWatchdog::Scope scope = watchdog.watch("barrier after loading weights", 5.0);
    std::this_thread::sleep_for(400ms);
  }
  EXPECT_TRUE(messages().empty());
}

TEST(WatchdogTimeout, ComesFromTheEnvironmentAndIsValidated) {
  constexpr const char* kName = "SELFSPEC_TEST_TIMEOUT_S";
  unsetenv(kName);
  EXPECT_DOUBLE_EQ(timeout_seconds_from_environment(kName, 42.0), 42.0);
  setenv(kName, "2.5", 1);
  EXPECT_DOUBLE_EQ(timeout_seconds_from_environment(kName, 42.0), 2.5);
  for (const char* bad : {"0", "-3", "soon", "5s", "inf"}) {
    setenv(kName, bad, 1);
    try {
      timeout_seconds_from_environment(kName, 42.0);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr(kName));
    }
  }
  unsetenv(kName);
  EXPECT_THROW(CollectiveWatchdog(0.0), Error);
}

}  // namespace
}  // namespace selfspec
