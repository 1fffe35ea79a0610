// bench-serving's clock (launch/bench/serving_clock.hpp): seeded Poisson arrivals, and hooks that
// let requests in as they arrive (waiting for the next one when idle), record each token's time
// and keep each result.
#include "launch/bench/serving_clock.hpp"

#include "core/error.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace selfspec::launch {
namespace {

TEST(ServingClock, PoissonArrivalsAreSeededAndHaveTheRate) {
  EXPECT_EQ(poisson_arrivals(3, 0.0, 1), (std::vector<double>{0.0, 0.0, 0.0}));
  const std::vector<double> a = poisson_arrivals(4000, 20.0, 7);
  EXPECT_EQ(a, poisson_arrivals(4000, 20.0, 7));
  EXPECT_NE(a, poisson_arrivals(4000, 20.0, 8));
  EXPECT_EQ(a.front(), 0.0);
  for (std::size_t i = 1; i < a.size(); ++i) ASSERT_GE(a[i], a[i - 1]);
  EXPECT_NEAR(a.back() / static_cast<double>(a.size() - 1), 1.0 / 20.0, 0.005);
  EXPECT_THROW(poisson_arrivals(2, -1.0, 1), Error);
}

TEST(ServingClock, LetsRequestsInAsTheyArriveAndRecordsTheirTimes) {
  std::vector<SpeculativeRequest> requests(3);
  for (auto& request : requests) request.prompt = {1, 2};
  ServingClock clock(requests, {0.0, 0.0, 0.06}, {});
  const SpeculativeBatch::Hooks hooks = clock.start();
  ASSERT_TRUE(hooks.arrived) << "arrivals after 0 are paced";
  EXPECT_EQ(hooks.arrived(true), 2) << "idle at the start, two requests waiting: no wait";
  hooks.on_token(1, 5);
  hooks.on_token(1, 6);
  EXPECT_EQ(hooks.arrived(false), 2) << "busy: never waits";
  GenerationResult result;
  result.tokens = {5, 6};
  hooks.on_done(1, std::move(result));
  hooks.on_done(0, GenerationResult{});
  EXPECT_EQ(hooks.arrived(true), 3) << "idle, nothing waiting: sleeps until the next arrival";
  EXPECT_GE(clock.stop(), 0.06);
  const RequestRecord& one = clock.records()[1];
  EXPECT_EQ(one.request, 1);
  EXPECT_EQ(one.prompt_tokens, 2);
  EXPECT_EQ(one.token_s.size(), 2u);
  EXPECT_LE(one.token_s.back(), one.end_s);
  EXPECT_EQ(one.tokens, (std::vector<std::int32_t>{5, 6}));
  EXPECT_EQ(clock.records()[2].arrival_s, 0.06);
  EXPECT_EQ(clock.interrupt_signal(), 0);
}

TEST(ServingClock, AllArrivingAtOnceNeedsNoPacingAndAStopEndsAWait) {
  std::vector<SpeculativeRequest> requests(2);
  EXPECT_FALSE(ServingClock(requests, {0.0, 0.0}, {}).start().arrived);
  ServingClock stopped(requests, {0.0, 1000.0}, [] { return true; });
  const SpeculativeBatch::Hooks hooks = stopped.start();
  hooks.on_done(0, GenerationResult{});
  EXPECT_EQ(hooks.arrived(true), 2) << "a pending stop lets the next request in at once";
  EXPECT_LT(stopped.stop(), 1.0);
  EXPECT_THROW(ServingClock(requests, {0.0}, {}), Error);
}

}  // namespace
}  // namespace selfspec::launch
