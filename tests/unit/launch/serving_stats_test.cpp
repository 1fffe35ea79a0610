// bench-serving's latency statistics (launch/bench/serving_stats.hpp): percentiles interpolate as
// numpy's do, a request's figures come from its arrival, token times and end, and a run's figures
// aggregate its requests over its wall time.
#include "launch/bench/serving_stats.hpp"

#include <gtest/gtest.h>

namespace selfspec::launch {
namespace {

RequestRecord record(double arrival, std::vector<double> token_s, double end) {
  RequestRecord r;
  r.arrival_s = arrival;
  r.token_s = std::move(token_s);
  r.end_s = end;
  r.tokens.assign(r.token_s.size(), 7);
  return r;
}

TEST(ServingStats, PercentilesInterpolateBetweenTheClosestRanks) {
  EXPECT_EQ(percentile({}, 50.0), 0.0);
  EXPECT_EQ(percentile({3.0}, 99.0), 3.0);
  EXPECT_DOUBLE_EQ(percentile({4.0, 1.0, 3.0, 2.0}, 50.0), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4.0, 1.0, 3.0, 2.0}, 99.0), 3.97);
  EXPECT_DOUBLE_EQ(percentile({4.0, 1.0, 3.0, 2.0}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({4.0, 1.0, 3.0, 2.0}, 100.0), 4.0);
  const Distribution d = distribution({1.0, 2.0, 3.0, 4.0});
  EXPECT_DOUBLE_EQ(d.p50, 2.5);
  EXPECT_DOUBLE_EQ(d.mean, 2.5);
  EXPECT_EQ(d.count, 4);
  EXPECT_EQ(distribution({}).count, 0);
}

TEST(ServingStats, ARequestsFiguresComeFromItsTimes) {
  // Arrives at 1, waits, gets one token at 2 and two at once at 3 (a speculative round), ends at 4.
  const RequestFigures f = request_figures(record(1.0, {2.0, 3.0, 3.0}, 4.0));
  EXPECT_DOUBLE_EQ(f.ttft_s, 1.0);
  EXPECT_DOUBLE_EQ(f.e2e_s, 3.0);
  EXPECT_DOUBLE_EQ(f.tokens_per_s, 1.0) << "two tokens after the first, in 2 s";
  EXPECT_EQ(f.itl_s, (std::vector<double>{1.0, 0.0})) << "gaps as they are, zeros included";
  const RequestFigures instant = request_figures(record(0.0, {1.0}, 1.0));
  EXPECT_EQ(instant.tokens_per_s, 0.0) << "no time after the first token";
  EXPECT_TRUE(instant.itl_s.empty());
}

TEST(ServingStats, ARunsFiguresAggregateItsRequests) {
  std::vector<RequestRecord> requests = {record(0.0, {1.0, 2.0}, 2.0),
                                         record(0.5, {1.5, 1.5, 3.5}, 4.0)};
  requests[0].stats.drafted = 4;
  requests[0].stats.accepted = 2;
  requests[0].stats.verify_forwards = 1;
  requests[0].stats.round_tokens = 2;
  requests[1].stats.verify_forwards = 2;
  requests[1].stats.round_tokens = 2;
  const ServingFigures f = serving_figures(requests, 5.0);
  EXPECT_EQ(f.requests, 2);
  EXPECT_EQ(f.generated_tokens, 5);
  EXPECT_DOUBLE_EQ(f.tokens_per_s, 1.0);
  EXPECT_DOUBLE_EQ(f.mean_request_tokens_per_s, 0.5 * (1.0 / 1.0 + 2.0 / 2.5));
  EXPECT_DOUBLE_EQ(f.ttft_s.p50, 1.0);
  EXPECT_EQ(f.itl_s.count, 3);
  EXPECT_DOUBLE_EQ(f.e2e_s.mean, 2.75);
  EXPECT_DOUBLE_EQ(f.mean_acceptance_rate, 0.25);
  EXPECT_DOUBLE_EQ(f.mean_accepted_length, 1.5);
  EXPECT_EQ(serving_figures({}, 0.0).tokens_per_s, 0.0);
}

}  // namespace
}  // namespace selfspec::launch
