// bench-serving's report (launch/bench/serving_report.hpp): speedups over plain decoding at the
// same concurrency and round, summaries per concurrency × mode over the rounds, and their JSON.
#include "launch/bench/serving_report.hpp"

#include <gtest/gtest.h>

namespace selfspec::launch {
namespace {

ServingRun run_of(int round, std::int64_t concurrency, const std::string& mode, double wall_s) {
  ServingRun run;
  run.round = round;
  run.concurrency = concurrency;
  run.mode = mode;
  RequestRecord request;
  request.token_s = {0.5, 1.0};
  request.tokens = {3, 4};
  request.end_s = wall_s;
  run.requests = {request};
  run.batch.passes = 2;
  run.batch.max_sequences = concurrency;
  run.figures = serving_figures(run.requests, wall_s);
  return run;
}

TEST(ServingReport, SpeedupsCompareWithPlainAtTheSameConcurrencyAndRound) {
  std::vector<ServingRun> runs = {run_of(0, 1, "plain", 2.0), run_of(0, 1, "fixed", 1.0),
                                  run_of(0, 2, "fixed", 1.0), run_of(1, 1, "plain", 1.0),
                                  run_of(1, 1, "fixed", 0.5)};
  compare_with_plain(runs);
  EXPECT_DOUBLE_EQ(*runs[0].speedup_vs_plain, 1.0);
  EXPECT_DOUBLE_EQ(*runs[1].speedup_vs_plain, 2.0);
  EXPECT_FALSE(runs[2].speedup_vs_plain) << "no plain run at concurrency 2";
  EXPECT_DOUBLE_EQ(*runs[4].speedup_vs_plain, 2.0);

  const std::vector<ServingSummary> summaries = summarize(runs);
  ASSERT_EQ(summaries.size(), 3u);
  EXPECT_EQ(summaries[0].mode, "plain");
  EXPECT_EQ(summaries[1].mode, "fixed");
  EXPECT_EQ(summaries[1].concurrency, 1);
  EXPECT_EQ(summaries[1].rounds, 2);
  EXPECT_DOUBLE_EQ(summaries[1].figures.tokens_per_s, 4.0 / 1.5);
  EXPECT_EQ(summaries[1].batch.passes, 4);
  EXPECT_DOUBLE_EQ(*summaries[1].speedup_vs_plain, 2.0);
  EXPECT_EQ(summaries[2].concurrency, 2);

  const nlohmann::json summary = to_json(summaries[2]);
  EXPECT_TRUE(summary["speedup_vs_plain"].is_null());
  EXPECT_EQ(summary["batch"]["max_sequences"], 2);
  EXPECT_EQ(summary["rounds"], 1);
  const nlohmann::json run = to_json(runs[1], /*tokens=*/true);
  EXPECT_EQ(run["requests"][0]["tokens"], (nlohmann::json{3, 4}));
  EXPECT_EQ(run["requests"][0]["itl_s"], (nlohmann::json{0.5}));
  EXPECT_FALSE(to_json(runs[1], false)["requests"][0].contains("tokens"));
}

}  // namespace
}  // namespace selfspec::launch
