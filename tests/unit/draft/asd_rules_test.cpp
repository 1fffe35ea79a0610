// Draft on the Fly's pieces without a model: Algorithm 1 (ADMG) on hand-made cosine vectors — the
// threshold, rule 1 (every m-th layer, 1-based), rule 2 (never the last n layers), the parameter
// checks naming their options —, the attention-cosine accumulator on hand-made residual streams
// (pairing each attention output with the right input, chunk invariance, errors), and the
// CosineSkipDrafter's request cycle (observe, decide once, report, reset).
#include "core/error.hpp"
#include "draft/adaptive_draft_model.hpp"
#include "draft/attention_cosine.hpp"
#include "draft/cosine_skip_drafter.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace selfspec {
namespace {

std::string error_of(const auto& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(AdaptiveDraftModel, AppliesThresholdAndRulesOneAndTwoWithOneBasedLayers) {
  // L = 10, m = 3, n = 2: layers l = 1..8 may go (0-based 0..7); rule 1 takes l = 3, 6
  // (0-based 2, 5); the threshold takes C >= 0.985 among 0..7, 0.985 itself included.
  const std::vector<double> acs = {0.5, 0.99, 0.98, 0.985, 0.9, 0.999, 0.7, 0.99, 0.995, 0.999};
  const SkipSet skips = adaptive_draft_skip_set(acs, AsdParams{0.985, 3, 2});
  EXPECT_EQ(skips.attention, (std::vector<int>{1, 2, 3, 5, 7}));
  EXPECT_EQ(skips.mlp, (std::vector<int>{2, 5}));
  EXPECT_EQ(skips.name, "asd");
  EXPECT_EQ(skips.num_layers, 10);
  EXPECT_NE(skips.source.find("Alg. 1"), std::string::npos);
}

TEST(AdaptiveDraftModel, RuleTwoProtectsTheLastNLayersFromBothRules) {
  const std::vector<double> acs(9, 0.999);  // every attention sublayer above any threshold
  // n = 3: layers 0..5 only; m = 3: rule 1 takes 0-based 2 and 5 (8 is protected).
  const SkipSet skips = adaptive_draft_skip_set(acs, AsdParams{0.985, 3, 3});
  EXPECT_EQ(skips.attention, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(skips.mlp, (std::vector<int>{2, 5}));
  // n = L: nothing may go; n = 0: everything may.
  EXPECT_TRUE(adaptive_draft_skip_set(acs, AsdParams{0.985, 3, 9}).attention.empty());
  const SkipSet all = adaptive_draft_skip_set(acs, AsdParams{0.985, 1, 0});
  EXPECT_EQ(all.attention.size(), 9u);
  EXPECT_EQ(all.mlp.size(), 9u);
}

TEST(AdaptiveDraftModel, WithoutHighCosinesOnlyRuleOneRemains) {
  const std::vector<double> acs = {0.1, 0.2, -0.3, 0.4, 0.5, 0.6, 0.7, 0.8};
  const SkipSet skips = adaptive_draft_skip_set(acs, AsdParams{0.985, 4, 2});
  EXPECT_EQ(skips.attention, (std::vector<int>{3}));  // l = 4; l = 8 is protected by n = 2
  EXPECT_EQ(skips.mlp, (std::vector<int>{3}));
  // m beyond the protected range: nothing at all.
  EXPECT_TRUE(adaptive_draft_skip_set(acs, AsdParams{0.985, 7, 2}).attention.empty());
}

TEST(AdaptiveDraftModel, ParameterErrorsNameTheOption) {
  const std::vector<double> acs(4, 0.9);
  EXPECT_NE(error_of([&] {
              adaptive_draft_skip_set(acs, AsdParams{1.0, 3, 2});
            }).find("--asd-alpha"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              adaptive_draft_skip_set(acs, AsdParams{0.0, 3, 2});
            }).find("--asd-alpha"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              adaptive_draft_skip_set(acs, AsdParams{0.9, 0, 2});
            }).find("--asd-m"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              adaptive_draft_skip_set(acs, AsdParams{0.9, 3, -1});
            }).find("--asd-n"),
            std::string::npos);
  const std::string too_many = error_of([&] {
    adaptive_draft_skip_set(acs, AsdParams{0.9, 3, 5});
  });
  EXPECT_NE(too_many.find("--asd-n"), std::string::npos) << too_many;
  EXPECT_NE(too_many.find("4 layers"), std::string::npos) << too_many;
}

TEST(CosineSimilarity, MatchesHandValuesAndHandlesZeroVectors) {
  const std::vector<float> x = {3, 4};
  EXPECT_DOUBLE_EQ(cosine_similarity(x, std::vector<float>{6, 8}), 1.0);
  EXPECT_DOUBLE_EQ(cosine_similarity(x, std::vector<float>{-4, 3}), 0.0);
  EXPECT_DOUBLE_EQ(cosine_similarity(x, std::vector<float>{-3, -4}), -1.0);
  EXPECT_NEAR(cosine_similarity(std::vector<float>{1, 0}, std::vector<float>{1, 1}),
              1.0 / std::sqrt(2.0), 1e-15);
  EXPECT_EQ(cosine_similarity(std::vector<float>{0, 0}, std::vector<float>{0, 0}), 1.0);
  EXPECT_EQ(cosine_similarity(std::vector<float>{0, 0}, x), 0.0);
}

// Two layers, hidden 2, two tokens; the residual after each sublayer, as LlamaModel reports it.
struct HandStream {
  std::vector<float> embed = {1, 0, 0, 1};
  std::vector<float> attn0 = {1, 1, 0, 2};  // cos 1/√2, 1
  std::vector<float> mlp0 = {3, 4, 1, 0};
  std::vector<float> attn1 = {6, 8, 0, 1};  // cos 1, 0
  std::vector<float> mlp1 = {7, 7, 7, 7};
  std::vector<float> norm = {1, 1};

  // Feeds tokens [begin, end) as one forward would.
  void feed(AttentionCosineAccumulator& acs, std::size_t begin, std::size_t end) const {
    const auto rows = [&](const std::vector<float>& all) {
      return std::span<const float>(all).subspan(2 * begin, 2 * (end - begin));
    };
    const auto n = static_cast<std::int64_t>(end - begin);
    acs.observe("embed", -1, rows(embed), n);
    acs.observe("attn_out", 0, rows(attn0), n);
    acs.observe("mlp_out", 0, rows(mlp0), n);
    acs.observe("attn_out", 1, rows(attn1), n);
    acs.observe("mlp_out", 1, rows(mlp1), n);
    acs.observe("final_norm", 2, norm, 1);
  }
};

TEST(AttentionCosineAccumulator, AveragesEachAttentionsInputOutputCosineOverTokens) {
  AttentionCosineAccumulator acs;
  acs.reset(2);
  HandStream().feed(acs, 0, 2);
  EXPECT_EQ(acs.tokens(), 2);
  const std::vector<double> c = acs.averages();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NEAR(c[0], (1.0 / std::sqrt(2.0) + 1.0) / 2.0, 1e-15);
  EXPECT_NEAR(c[1], 0.5, 1e-15);
}

TEST(AttentionCosineAccumulator, ChunkedPrefillGivesTheSameSums) {
  AttentionCosineAccumulator whole;
  whole.reset(2);
  HandStream().feed(whole, 0, 2);
  AttentionCosineAccumulator chunked;
  chunked.reset(2);
  HandStream().feed(chunked, 0, 1);
  HandStream().feed(chunked, 1, 2);
  EXPECT_EQ(chunked.tokens(), 2);
  EXPECT_EQ(chunked.averages(), whole.averages());  // bit for bit
}

TEST(AttentionCosineAccumulator, RejectsAnOutputWithoutItsInputAndAnEmptyPrompt) {
  AttentionCosineAccumulator acs;
  acs.reset(2);
  EXPECT_NE(error_of([&] { acs.averages(); }).find("no prompt token"), std::string::npos);
  const std::vector<float> row = {1, 2};
  EXPECT_NE(error_of([&] { acs.observe("attn_out", 0, row, 1); }).find("without its input"),
            std::string::npos);
  acs.observe("embed", -1, row, 1);
  EXPECT_NE(error_of([&] { acs.observe("attn_out", 1, row, 1); }).find("layer 1"),
            std::string::npos);
}

TEST(CosineSkipDrafter, DecidesOncePerRequestFromTheObservedPromptAndResets) {
  // Hand stream: C = {0.854, 0.5}; α 0.8, m 5 (no rule-1 layer), n 0 → skip attention 0 only.
  CosineSkipDrafter drafter(2, AsdParams{0.8, 5, 0});
  EXPECT_TRUE(drafter.state().is_null());
  const ForwardObserver* observer = drafter.begin_request(2);
  ASSERT_NE(observer, nullptr);
  AttentionCosineAccumulator direct;
  direct.reset(2);
  const HandStream stream;
  stream.feed(direct, 0, 2);
  const auto feed = [&](std::string_view name, int layer, const std::vector<float>& data) {
    (*observer)(name, layer, data, 2);
  };
  feed("embed", -1, stream.embed);
  feed("attn_out", 0, stream.attn0);
  feed("mlp_out", 0, stream.mlp0);
  feed("attn_out", 1, stream.attn1);
  feed("mlp_out", 1, stream.mlp1);
  const LayerPlan plan = drafter.next_plan().layers;
  EXPECT_EQ(plan, LayerPlan::skipping(2, std::vector<int>{0}, std::vector<int>{}));
  EXPECT_EQ(drafter.acs(), direct.averages());
  const nlohmann::json state = drafter.state();
  EXPECT_EQ(state["skip_set"]["attention"], nlohmann::json::array({0}));
  EXPECT_EQ(state["skipped_sublayers"], 1);
  EXPECT_EQ(state["prompt_tokens"], 2);
  EXPECT_EQ(state["acs"].size(), 2u);
  EXPECT_EQ(drafter.next_plan().layers, plan);  // decided once for the request

  // A new request forgets the old one: its prompt has every attention unchanged (C = 1).
  observer = drafter.begin_request(1);
  EXPECT_TRUE(drafter.state().is_null());
  const std::vector<float> row = {1, 2};
  (*observer)("embed", -1, row, 1);
  (*observer)("attn_out", 0, row, 1);
  (*observer)("mlp_out", 0, row, 1);
  (*observer)("attn_out", 1, row, 1);
  EXPECT_EQ(drafter.next_plan().layers,
            LayerPlan::skipping(2, std::vector<int>{0, 1}, std::vector<int>{}));
  ASSERT_EQ(drafter.acs().size(), 2u);
  for (double c : drafter.acs()) EXPECT_NEAR(c, 1.0, 1e-15);
}

TEST(CosineSkipDrafter, PlanningBeforeAnyPromptIsAnError) {
  CosineSkipDrafter drafter(3, AsdParams{});
  EXPECT_NE(error_of([&] { drafter.next_plan().layers; }).find("no prompt token"),
            std::string::npos);
  EXPECT_NE(error_of([] { CosineSkipDrafter(1, AsdParams{}); }).find("--asd-n"), std::string::npos);
}

}  // namespace
}  // namespace selfspec
