// The skip-set search on a tiny model (one rank):
//  * the search space maps masks to plans and back, keeping the first and last layers;
//  * matchness of the full plan is exactly 1 (token-count invariance: a window's rows equal the
//    decode steps that made the targets), for any window; a skipping plan scores below 1; and
//    evaluating twice gives the same count (the KV rows are restored);
//  * the cost table's c and its JSON round trip; refusal of malformed tables;
//  * the state file round trip;
//  * a search stopped after k evaluations and resumed ends with exactly the evaluations and the
//    winner of an uninterrupted search; a resume with different settings is refused.
#include "search/skip_search.hpp"
#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "draft/skip_search_space.hpp"
#include "search/calibration_set.hpp"
#include "search/matchness.hpp"
#include "search/search_state.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_models.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace selfspec::testing {
namespace {

TEST(SkipSearchSpace, MapsMasksToPlansKeepingFirstAndLastLayers) {
  const SkipSearchSpace space(5);
  EXPECT_EQ(space.dims(), 6);
  const BinaryMask mask = {1, 0, 1, 0, 1, 0};  // attention 1, 3; MLP 2
  const LayerPlan plan = space.plan(mask);
  EXPECT_EQ(plan.skipped_attention(), (std::vector<int>{1, 3}));
  EXPECT_EQ(plan.skipped_mlp(), (std::vector<int>{2}));
  EXPECT_EQ(space.mask(plan), mask);
  const std::vector<int> first = {0}, none;
  EXPECT_THROW(space.mask(LayerPlan::skipping(5, first, none)), Error);
  EXPECT_THROW(space.plan(BinaryMask(5, 0)), Error);
  EXPECT_THROW(SkipSearchSpace(2), Error);
}

SublayerCostTable hand_table() {
  SublayerCostTable t;
  t.num_layers = 4;
  t.fixed_s = 2.0;
  t.attention_s.assign(4, 1.0);
  t.mlp_s.assign(4, 1.5);
  t.verify_ratio = {1.0, 1.1, 1.2, 1.3};
  t.device = "hand";
  return t;
}

TEST(SublayerCostTable, CostRatioAndJsonRoundTrip) {
  const SublayerCostTable t = hand_table();
  EXPECT_DOUBLE_EQ(t.full_seconds(), 12.0);
  const std::vector<int> attn = {1, 2}, mlp = {2};
  EXPECT_DOUBLE_EQ(t.cost_ratio(LayerPlan::skipping(4, attn, mlp)), (12.0 - 2.0 - 1.5) / 12.0);
  // A pruned draft head keeping a quarter of the vocabulary costs a quarter of head_s.
  SublayerCostTable with_head = t;
  with_head.head_s = 1.0;
  EXPECT_DOUBLE_EQ(with_head.cost_ratio(LayerPlan::skipping(4, attn, mlp), 0.25),
                   (12.0 - 2.0 - 1.5 - 0.75) / 12.0);
  EXPECT_THROW(with_head.cost_ratio(LayerPlan::full(4), 0.0), Error);
  const SublayerCostTable back = SublayerCostTable::from_json(t.to_json(), "t");
  EXPECT_EQ(back.to_json(), t.to_json());
  nlohmann::json bad = t.to_json();
  bad["mlp_s"] = {1.0};
  EXPECT_THROW(SublayerCostTable::from_json(bad, "t"), Error);
  bad = t.to_json();
  bad.erase("fixed_s");
  EXPECT_THROW(SublayerCostTable::from_json(bad, "t"), Error);
  bad = t.to_json();
  bad["verify_ratio"] = {1.0, -2.0};
  EXPECT_THROW(SublayerCostTable::from_json(bad, "t"), Error);
}

class TinySearch : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = write_and_load_model(speculative_tiny_spec(5), dir_.path() / "model", comm_);
    CalibrationOptions options;
    options.tokens = 20;
    const std::vector<std::vector<std::int32_t>> prompts = {{1, 14, 3, 27, 9, 40}, {5, 6, 7}};
    set_ = build_calibration_set(*model_, comm_, prompts, options);
  }

  SkipSearchOptions search_options(int budget) const {
    SkipSearchOptions o;
    o.budget = budget;
    o.seed = 7;
    o.initial_random = 3;
    o.initial_uniform = {0.2};
    o.state_file = dir_.path() / "state.json";
    o.log_file = dir_.path() / "log.jsonl";
    o.cost_table_file = dir_.path() / "cost.json";
    o.settings = {{"test", "tiny"}};
    std::ofstream(*o.cost_table_file) << [] {
      SublayerCostTable t = hand_table();
      t.num_layers = 5;
      t.attention_s.assign(5, 1.0);
      t.mlp_s.assign(5, 1.5);
      return t.to_json().dump();
    }();
    return o;
  }

  TempDir dir_{"selfspec-search"};
  LocalComm comm_;
  std::unique_ptr<LlamaModel> model_;
  std::vector<CalibrationSequence> set_;
};

TEST_F(TinySearch, FullPlanMatchesEveryTargetForAnyWindow) {
  for (int window : {1, 3, 8, 64}) {
    MatchnessEvaluator evaluator(*model_, comm_, set_, window);
    const DraftMatch count = evaluator.evaluate(LayerPlan::full(5));
    EXPECT_EQ(count.positions, 40) << "window " << window;
    EXPECT_EQ(count.matches, count.positions) << "window " << window;
  }
}

TEST_F(TinySearch, SkippingPlansScoreBelowOneAndRepeatExactly) {
  MatchnessEvaluator evaluator(*model_, comm_, set_, 4);
  const std::vector<int> attn = {1, 2, 3}, mlp = {1, 2, 3};
  const LayerPlan plan = LayerPlan::skipping(5, attn, mlp);
  const DraftMatch first = evaluator.evaluate(plan);
  EXPECT_LT(first.matches, first.positions);
  const DraftMatch again = evaluator.evaluate(plan);
  EXPECT_EQ(again.matches, first.matches);
  // And the full plan still matches everything after the KV rows were overwritten and restored.
  EXPECT_EQ(evaluator.evaluate(LayerPlan::full(5)).matches, 40);
}

TEST_F(TinySearch, CalibrationFingerprintChangesWithTheTargets) {
  const std::uint64_t a = calibration_fingerprint(set_);
  set_[0].continuation[3] ^= 1;
  EXPECT_NE(calibration_fingerprint(set_), a);
}

TEST_F(TinySearch, StateFileRoundTrip) {
  SearchState state;
  state.settings = {{"x", 1}};
  state.cost_table = hand_table();
  SearchEvaluation e;
  e.iteration = 0;
  e.phase = "initial";
  e.mask = {1, 0, 1};
  e.attention = {1};
  e.alpha = 0.5;
  e.objective = 1.25;
  state.evaluations.push_back(e);
  const auto path = dir_.path() / "s.json";
  save_search_state(path, state);
  const SearchState back = load_search_state(path);
  EXPECT_EQ(back.to_json(), state.to_json());
  std::ofstream(path) << "{\"version\": 1}";
  EXPECT_THROW(load_search_state(path), Error);
}

TEST_F(TinySearch, AResumedSearchEndsLikeAnUninterruptedOne) {
  MatchnessEvaluator evaluator(*model_, comm_, set_, 4);
  const SkipSearchResult whole = SkipSearch(*model_, comm_, evaluator, search_options(9)).run();
  ASSERT_EQ(whole.evaluations.size(), 9u);
  std::filesystem::remove(dir_.path() / "state.json");

  // Stopped after 5 evaluations (as a stop request does), then resumed with the full budget.
  SkipSearchOptions first = search_options(9);
  int polls = 0;
  first.interrupt = [&polls] { return ++polls > 5 ? 15 : 0; };
  const SkipSearchResult part = SkipSearch(*model_, comm_, evaluator, first).run();
  EXPECT_EQ(part.interrupted, 15);
  ASSERT_EQ(part.evaluations.size(), 5u);
  SkipSearchOptions second = search_options(9);
  second.resume = true;
  const SkipSearchResult resumed = SkipSearch(*model_, comm_, evaluator, second).run();
  EXPECT_EQ(resumed.resumed_from, 5);
  ASSERT_EQ(resumed.evaluations.size(), whole.evaluations.size());
  for (std::size_t i = 0; i < whole.evaluations.size(); ++i) {
    SearchEvaluation a = whole.evaluations[i], b = resumed.evaluations[i];
    a.seconds = b.seconds = 0.0;
    EXPECT_EQ(a.to_json(), b.to_json()) << "evaluation " << i;
  }
  EXPECT_EQ(resumed.best, whole.best);
  // The log holds every evaluation once.
  std::ifstream log(dir_.path() / "log.jsonl");
  int lines = 0;
  for (std::string line; std::getline(log, line);) ++lines;
  EXPECT_EQ(lines, 9);

  SkipSearchOptions other = search_options(10);
  other.resume = true;
  other.settings = {{"test", "different"}};
  EXPECT_THROW(SkipSearch(*model_, comm_, evaluator, other).run(), Error);
}

TEST_F(TinySearch, TheWinnerIsTheBestEvaluation) {
  MatchnessEvaluator evaluator(*model_, comm_, set_, 4);
  const SkipSearchResult r = SkipSearch(*model_, comm_, evaluator, search_options(8)).run();
  for (const SearchEvaluation& e : r.evaluations) {
    EXPECT_LE(e.objective, r.evaluations[r.best].objective);
    EXPECT_GT(e.cost, 0.0);
    EXPECT_LT(e.cost, 1.0);
    EXPECT_GE(e.alpha, 0.0);
    EXPECT_LE(e.alpha, 1.0);
  }
}

}  // namespace
}  // namespace selfspec::testing
