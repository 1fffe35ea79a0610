// SWIFT's on-the-fly skip search inside the decoding loop (one rank):
//  * DraftContext::score_plan: the full plan's matchness over greedy output is exactly 1 (the
//    window's rows equal the decode steps that chose those tokens), a heavily skipping plan's is
//    below 1, and the KV cache is left exactly as it was;
//  * SwiftDrafter: greedy output is token-identical to plain decoding for several settings; the
//    search takes steps, keeps its skip ratio, stops for the documented reasons, and carries its
//    state to the next request; the KV cache at the end equals a fresh run's.
#include "comm/local_comm.hpp"
#include "control/draft_length_controller.hpp"
#include "core/error.hpp"
#include "decode/decoder.hpp"
#include "draft/swift_drafter.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_models.hpp"

#include <gtest/gtest.h>

namespace selfspec::testing {
namespace {

constexpr int kLayers = 6;

class Swift : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = write_and_load_model(speculative_tiny_spec(kLayers), dir_.path(), comm_);
    generation_.max_new_tokens = 48;
    generation_.ignore_eos = true;
  }

  std::vector<std::int32_t> autoregressive() {
    KvCache kv = model_->make_kv_cache(static_cast<std::int64_t>(prompt_.size()) + 48);
    return Decoder(*model_, comm_).generate(prompt_, generation_, kv).tokens;
  }

  GenerationResult run(Drafter& drafter, KvCache* kv_out = nullptr) {
    KvCache kv = model_->make_kv_cache(static_cast<std::int64_t>(prompt_.size()) + 48);
    ControllerOptions controller_options;
    controller_options.kind = "fixed";
    controller_options.max_draft = 4;
    auto controller = make_draft_length_controller(controller_options);
    GenerationResult r =
        Decoder(*model_, comm_, drafter, *controller).generate(prompt_, generation_, kv);
    if (kv_out != nullptr) *kv_out = std::move(kv);
    return r;
  }

  TempDir dir_;
  LocalComm comm_;
  std::unique_ptr<LlamaModel> model_;
  GenerationOptions generation_;
  const std::vector<std::int32_t> prompt_ = {1, 14, 3, 27, 9, 40};
};

// Scores fixed plans from inside the loop and keeps the counts; drafts like LayerSkipDrafter.
class ScoringDrafter final : public Drafter {
 public:
  explicit ScoringDrafter(std::vector<LayerPlan> plans, int window)
      : plans_(std::move(plans)), window_(window), full_(LayerPlan::full(kLayers)) {}
  std::string_view name() const override { return "scoring"; }
  DraftPlan next_plan() override { return {full_}; }
  void propose(DraftContext& context, Draft& draft) override {
    if (context.generated() >= window_) {
      for (std::size_t i = 0; i < plans_.size(); ++i) {
        const DraftMatch m = context.score_plan(plans_[i], window_);
        matches.resize(plans_.size());
        matches[i].matches += m.matches;
        matches[i].positions += m.positions;
      }
    }
    Drafter::propose(context, draft);
  }
  std::vector<DraftMatch> matches;

 private:
  std::vector<LayerPlan> plans_;
  int window_;
  LayerPlan full_;
};

TEST_F(Swift, ScorePlanOfTheFullPlanMatchesEveryGreedyTokenAndKeepsTheCache) {
  const std::vector<std::int32_t> expected = autoregressive();
  const std::vector<int> most = {1, 2, 3, 4};
  ScoringDrafter drafter({LayerPlan::full(kLayers), LayerPlan::skipping(kLayers, most, most)}, 8);
  KvCache kv = model_->make_kv_cache(1);
  const GenerationResult r = run(drafter, &kv);
  EXPECT_EQ(r.tokens, expected);
  ASSERT_EQ(drafter.matches.size(), 2u);
  EXPECT_GT(drafter.matches[0].positions, 40);
  EXPECT_EQ(drafter.matches[0].matches, drafter.matches[0].positions);
  EXPECT_LT(drafter.matches[1].matches, drafter.matches[1].positions);
  EXPECT_GT(r.stats.score_forwards, 0);

  // The cache after all those scoring forwards equals a fresh run over the same tokens.
  std::vector<std::int32_t> sequence = prompt_;
  sequence.insert(sequence.end(), r.tokens.begin(), r.tokens.end());
  expect_kv_equals_fresh_run(*model_, kv, sequence);
}

TEST_F(Swift, GreedyOutputIsTokenIdenticalForEverySetting) {
  const std::vector<std::int32_t> expected = autoregressive();
  for (double ratio : {0.1, 0.3, 0.5}) {
    for (int window : {4, 16}) {
      for (int bayes_every : {1, 3}) {
        SwiftOptions o;
        o.skip_ratio = ratio;
        o.window = window;
        o.min_window = std::min(4, window);
        o.bayes_every = bayes_every;
        o.seed = 5;
        SwiftDrafter drafter(kLayers, o);
        const GenerationResult r = run(drafter);
        EXPECT_EQ(r.tokens, expected) << ratio << " " << window << " " << bayes_every;
        const nlohmann::json state = drafter.state();
        EXPECT_GE(state["steps"].get<int>(), 1) << state.dump();
        // Every candidate keeps the skip ratio: round(r · 2L) sublayers, never layer 0 or L−1.
        const LayerPlan& best = drafter.best_plan();
        EXPECT_EQ(best.skipped_count(), std::lround(ratio * 2 * kLayers));
        EXPECT_TRUE(best.runs_attention(0) && best.runs_mlp(0));
        EXPECT_TRUE(best.runs_attention(kLayers - 1) && best.runs_mlp(kLayers - 1));
      }
    }
  }
}

TEST_F(Swift, TheSearchStopsForTheDocumentedReasonsAndCarriesOver) {
  SwiftOptions o;
  o.skip_ratio = 0.3;
  o.window = 8;
  o.min_window = 4;
  o.max_steps = 5;
  SwiftDrafter budget(kLayers, o);
  run(budget);
  EXPECT_FALSE(budget.searching());
  EXPECT_EQ(budget.state()["steps"], 5);
  EXPECT_EQ(budget.state()["stopped_because"], "step budget spent");

  o.max_steps = 1000;
  o.patience = 3;
  SwiftDrafter patience(kLayers, o);
  run(patience);
  EXPECT_EQ(patience.state()["stopped_because"], "no improvement");

  o.patience = 1000;
  o.stop_matchness = 0.01;  // any set matches that much
  SwiftDrafter score(kLayers, o);
  run(score);
  EXPECT_EQ(score.state()["steps"], 1);
  EXPECT_EQ(score.state()["stopped_because"], "stop score reached");

  // A search space small enough to exhaust: 1 of 8 sublayers.
  o = {};
  o.skip_ratio = 0.1;
  o.window = 8;
  o.min_window = 4;
  o.stop_matchness = 1.0;
  o.patience = 1000;
  SwiftDrafter tiny(kLayers, o);
  run(tiny);
  const std::string reason = tiny.state()["stopped_because"];
  EXPECT_TRUE(reason == "every candidate scored" || reason == "stop score reached") << reason;
  if (reason == "every candidate scored") {
    EXPECT_EQ(tiny.state()["steps"], 8);
  }
  o.skip_ratio = 0.3;

  // A second request continues the first one's search instead of starting over.
  o.stop_matchness = 0.999;
  o.max_steps = 1000;
  SwiftDrafter carried(kLayers, o);
  run(carried);
  const int after_one = carried.state()["steps"].get<int>();
  const std::vector<std::int32_t> expected = autoregressive();
  EXPECT_EQ(run(carried).tokens, expected);
  EXPECT_GT(carried.state()["steps"].get<int>(), after_one);
}

TEST(SwiftOptions, RefusesOutOfRangeValuesNamingTheOption) {
  SwiftOptions o;
  o.skip_ratio = 1.0;
  EXPECT_THROW(o.validate(), Error);
  o = {};
  o.window = 0;
  EXPECT_THROW(o.validate(), Error);
  o = {};
  o.min_window = 64;
  try {
    o.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--swift-min-window"), std::string::npos);
  }
}

}  // namespace
}  // namespace selfspec::testing
