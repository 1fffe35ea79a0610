// The draft as data (chains and token trees: parents, depths, alternatives, paths, the
// verification mask), tree widths by confidence, and the Drafter's default proposal (chains, and
// trees from steps' alternatives) against a scripted DraftContext.
#include "draft/draft.hpp"
#include "core/error.hpp"
#include "draft/drafter.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "draft/tree_widths.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace selfspec {
namespace {

TEST(Draft, AChainContinuesTheRootAndThenEachNode) {
  Draft draft;
  EXPECT_TRUE(draft.empty());
  EXPECT_TRUE(draft.is_chain());
  EXPECT_EQ(draft.last(), Draft::kRoot);
  EXPECT_EQ(draft.add(11, Draft::kRoot, 0.9), 0);
  EXPECT_EQ(draft.add(12, 0, 0.8), 1);
  EXPECT_EQ(draft.add(13, 1, 0.7), 2);
  EXPECT_TRUE(draft.is_chain());
  EXPECT_EQ(draft.size(), 3);
  EXPECT_EQ(draft.depth(Draft::kRoot), 0);
  EXPECT_EQ(draft.depth(2), 3);
  EXPECT_EQ(std::vector<std::int32_t>(draft.tokens().begin(), draft.tokens().end()),
            (std::vector<std::int32_t>{11, 12, 13}));
  EXPECT_EQ(std::vector<double>(draft.confidences().begin(), draft.confidences().end()),
            (std::vector<double>{0.9, 0.8, 0.7}));
  // The verification mask of a chain is causal over [root, 11, 12, 13].
  const AttentionMask mask = draft.tree_mask();
  ASSERT_EQ(mask.n_tokens(), 4);
  for (int row = 0; row < 4; ++row) {
    for (int col = 0; col < 4; ++col) {
      EXPECT_EQ(mask.data()[row * 4 + col], col <= row ? 1 : 0) << row << "," << col;
    }
  }
  draft.clear();
  EXPECT_TRUE(draft.empty());
}

TEST(Draft, ATreeMaskLetsEachNodeSeeOnlyItsAncestors) {
  // root ─ a(0) ─ c(2)
  //      └ b(1) ─ d(3) ─ e(4)
  Draft draft;
  draft.add(100, Draft::kRoot, 0.5);
  draft.add(101, Draft::kRoot, 0.3);
  draft.add(102, 0, 0.4);
  draft.add(103, 1, 0.6);
  draft.add(104, 3, 0.2);
  EXPECT_FALSE(draft.is_chain());
  EXPECT_EQ(draft.depth(4), 3);
  EXPECT_EQ(draft.parent(2), 0);
  const std::vector<std::vector<int>> sees = {{0},       {0, 1},    {0, 2},
                                              {0, 1, 3}, {0, 2, 4}, {0, 2, 4, 5}};
  const AttentionMask mask = draft.tree_mask();
  ASSERT_EQ(mask.n_tokens(), 6);
  for (int row = 0; row < 6; ++row) {
    for (int col = 0; col < 6; ++col) {
      const bool visible = std::find(sees[static_cast<std::size_t>(row)].begin(),
                                     sees[static_cast<std::size_t>(row)].end(),
                                     col) != sees[static_cast<std::size_t>(row)].end();
      EXPECT_EQ(mask.data()[row * 6 + col], visible ? 1 : 0) << row << "," << col;
    }
  }
}

TEST(Draft, ANodeMustContinueAnEarlierOne) {
  Draft draft;
  EXPECT_THROW(draft.add(1, 0, 0.0), Error);
  draft.add(1, Draft::kRoot, 0.0);
  EXPECT_THROW(draft.add(2, 1, 0.0), Error);
  EXPECT_THROW(draft.add(2, -2, 0.0), Error);
}

TEST(Draft, AlternativesAreSiblingsOfTheDrawnTokenAndPathsFollowTokens) {
  // root ─ 10(0) ─ 20(3) ─ 30(5)
  //      ├ 11(1)  ├ 21(4)
  //      └ 12(2)
  Draft draft;
  draft.add(10, Draft::kRoot, 0.4);
  draft.add_alternative(11, Draft::kRoot);
  draft.add_alternative(12, Draft::kRoot);
  draft.add(20, 0, 0.7);
  draft.add_alternative(21, 0);
  draft.add(30, 3, 0.99);
  EXPECT_FALSE(draft.is_chain());
  EXPECT_EQ(draft.drawn(), 3);
  EXPECT_EQ(draft.size(), 6);
  EXPECT_FALSE(draft.is_alternative(0));
  EXPECT_TRUE(draft.is_alternative(1));
  EXPECT_TRUE(draft.is_alternative(4));
  EXPECT_EQ(draft.children(Draft::kRoot), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(draft.children(0), (std::vector<int>{3, 4}));
  EXPECT_TRUE(draft.children(5).empty());
  EXPECT_EQ(draft.child_with(0, 21), 4);
  EXPECT_EQ(draft.child_with(0, 12), Draft::kRoot);
  EXPECT_EQ(draft.path_of(std::vector<std::int32_t>{10, 21}), (std::vector<int>{0, 4}));
  EXPECT_EQ(draft.path_of(std::vector<std::int32_t>{10, 20, 30}), (std::vector<int>{0, 3, 5}));
  EXPECT_TRUE(draft.path_of(std::vector<std::int32_t>{}).empty());
  EXPECT_THROW(draft.path_of(std::vector<std::int32_t>{10, 30}), Error);
  EXPECT_TRUE(Draft::is_prefix(std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(Draft::is_prefix(std::vector<int>{0, 3}));
  // Siblings must differ, or a token sequence would name two paths.
  EXPECT_THROW(draft.add_alternative(10, Draft::kRoot), Error);
  EXPECT_THROW(draft.add(21, 0, 0.1), Error);
  draft.clear();
  EXPECT_EQ(draft.drawn(), 0);
}

TEST(TreeWidths, BinsByConfidence) {
  const TreeWidths swift = TreeWidths::swift();
  EXPECT_EQ(swift.width(0.1), 10);
  EXPECT_EQ(swift.width(0.5), 10);
  EXPECT_EQ(swift.width(0.51), 5);
  EXPECT_EQ(swift.width(0.9), 3);
  EXPECT_EQ(swift.width(0.96), 1);
  EXPECT_EQ(swift.max_width(), 10);
  EXPECT_EQ(swift.describe(), "0.5:10,0.8:5,0.95:3,1:1");
  EXPECT_EQ(TreeWidths::parse("swift").describe(), swift.describe());
  EXPECT_TRUE(TreeWidths::parse("none").is_chain());
  EXPECT_TRUE(TreeWidths::parse("1:1").is_chain());
  const TreeWidths custom = TreeWidths::parse("0.3:4,1:2");
  EXPECT_EQ(custom.width(0.2), 4);
  EXPECT_EQ(custom.width(1.0), 2);
  for (const char* bad : {"", "wide", "0.5", "0.5:0,1:1", "0.8:2,0.5:3,1:1", "0.5:2", "1.5:2",
                          "0:2,1:1", "0.5:2x,1:1", "0.5:2,,1:1"}) {
    try {
      TreeWidths::parse(bad, "--tree");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--tree"), std::string::npos) << e.what();
    }
  }
}

// A context that answers steps from a script: the tokens rank 0 would pick and when it stops.
class ScriptedContext final : public DraftContext {
 public:
  ScriptedContext(std::vector<std::int32_t> tokens, LayerPlan plan)
      : tokens_(std::move(tokens)), plan_{std::move(plan)} {}
  const DraftPlan& plan() const override { return plan_; }
  DraftStep step(const Draft& draft, int parent) override {
    parents.push_back(parent);
    const auto i = static_cast<std::size_t>(draft.drawn());
    DraftStep step{tokens_[i], 0.5, i + 1 < tokens_.size(), {}};
    if (!alternatives.empty()) step.alternatives = alternatives[i];
    return step;
  }
  std::vector<std::vector<std::int32_t>> alternatives;  // per step (none: a chain)
  bool is_root() const override { return true; }
  std::int64_t generated() const override { return 0; }
  void share(std::span<std::byte>) override {}
  DraftMatch score_plan(const LayerPlan&, int) override {
    ADD_FAILURE() << "a chain drafter scores no plan";
    return {};
  }
  void history(std::vector<std::int32_t>& out) const override { out = sequence; }
  int draft_room() const override { return room; }
  std::vector<int> parents;
  std::vector<std::int32_t> sequence;  // history(): the prompt and output so far
  int room = 8;

 private:
  std::vector<std::int32_t> tokens_;
  DraftPlan plan_;
};

TEST(Drafter, TheDefaultProposalIsAChainUntilRankZeroStops) {
  const LayerPlan plan = LayerPlan::skipping(6, std::vector<int>{2}, std::vector<int>{3, 4});
  LayerSkipDrafter drafter(plan, "scripted");
  EXPECT_EQ(drafter.next_plan().layers, plan);
  EXPECT_EQ(drafter.name(), "scripted");
  ScriptedContext context({7, 8, 9, 10}, plan);
  Draft draft;
  drafter.propose(context, draft);
  EXPECT_EQ(context.parents, (std::vector<int>{Draft::kRoot, 0, 1, 2}));
  EXPECT_EQ(std::vector<std::int32_t>(draft.tokens().begin(), draft.tokens().end()),
            (std::vector<std::int32_t>{7, 8, 9, 10}));
  EXPECT_TRUE(draft.is_chain());

  ScriptedContext single({5}, plan);
  Draft one;
  drafter.propose(single, one);
  EXPECT_EQ(one.size(), 1);
}

TEST(Drafter, AStepsAlternativesBecomeSiblingsAndDraftingContinuesFromTheDrawnToken) {
  const LayerPlan plan = LayerPlan::skipping(6, std::vector<int>{2}, std::vector<int>{});
  LayerSkipDrafter drafter(plan, "scripted");
  ScriptedContext context({7, 8, 9}, plan);
  context.alternatives = {{17, 27}, {}, {19}};
  Draft draft;
  drafter.propose(context, draft);
  // Nodes: 7(0) 17(1) 27(2) | 8(3) | 9(4) 19(5)
  EXPECT_EQ(context.parents, (std::vector<int>{Draft::kRoot, 0, 3}));
  EXPECT_EQ(std::vector<std::int32_t>(draft.tokens().begin(), draft.tokens().end()),
            (std::vector<std::int32_t>{7, 17, 27, 8, 9, 19}));
  EXPECT_EQ(std::vector<int>(draft.parents().begin(), draft.parents().end()),
            (std::vector<int>{Draft::kRoot, Draft::kRoot, Draft::kRoot, 0, 3, 3}));
  EXPECT_EQ(draft.drawn(), 3);
  EXPECT_TRUE(draft.is_alternative(5));
}

}  // namespace
}  // namespace selfspec
