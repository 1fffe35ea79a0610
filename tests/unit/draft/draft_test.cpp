// The draft as data (chains and token trees: parents, depths, alternatives, sourced nodes, paths,
// the verification mask), tree widths by confidence, the Drafter's default proposal (chains, and
// trees from steps' alternatives) and SourcedDrafter's rounds (a source alone, or grafted onto the
// model's draft as a branch; proposal lengths from running acceptance) against a scripted
// DraftContext.
#include "draft/draft.hpp"
#include "core/error.hpp"
#include "draft/draft_source.hpp"
#include "draft/drafter.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "draft/sourced_drafter.hpp"
#include "draft/tree_widths.hpp"

#include <gtest/gtest.h>

#include <memory>
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

TEST(Draft, SourcedNodesArePointMassesThatMayContinueOneAnother) {
  // root ─ 10(0) ─ 20(3)
  //      ├ 11(1)
  //      └ 40(2) ─ 41(4) ─ 42(5)    (sourced: 2, 4, 5; a lookup branch)
  Draft draft;
  draft.add(10, Draft::kRoot, 0.4);
  draft.add_alternative(11, Draft::kRoot);
  draft.add_sourced(40, Draft::kRoot);
  draft.add(20, 0, 0.7);
  draft.add_sourced(41, 2);
  draft.add_sourced(42, 4);
  EXPECT_EQ(draft.drawn(), 2);
  EXPECT_EQ(draft.sourced(), 3);
  EXPECT_TRUE(draft.is_sourced(2));
  EXPECT_FALSE(draft.is_alternative(2));
  EXPECT_TRUE(draft.is_point_mass(1));
  EXPECT_TRUE(draft.is_point_mass(5));
  EXPECT_FALSE(draft.is_point_mass(3));
  EXPECT_EQ(draft.path_of(std::vector<std::int32_t>{40, 41, 42}), (std::vector<int>{2, 4, 5}));
  EXPECT_EQ(draft.depth(5), 3);
  EXPECT_THROW(draft.add_sourced(20, 0), Error);  // siblings still differ
  // The first nodes form a draft of their own, kinds and marks kept.
  const Draft first = draft.prefix(4);
  EXPECT_EQ(first.size(), 4);
  EXPECT_EQ(first.drawn(), 2);
  EXPECT_EQ(first.sourced(), 1);
  EXPECT_TRUE(first.is_alternative(1));
  EXPECT_EQ(first.parent(3), 0);
  EXPECT_EQ(draft.prefix(0).size(), 0);
  EXPECT_THROW((void)draft.prefix(7), Error);
  draft.clear();
  EXPECT_EQ(draft.sourced(), 0);
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

// A source that proposes the same tokens each round (as many as the room allows).
class FixedSource final : public DraftSource {
 public:
  explicit FixedSource(std::vector<std::int32_t> tokens) : tokens_(std::move(tokens)) {}
  std::string_view name() const override { return "fixed"; }
  std::vector<std::int32_t> propose(std::span<const std::int32_t>, int room) override {
    const auto n = std::min(tokens_.size(), static_cast<std::size_t>(room));
    return {tokens_.begin(), tokens_.begin() + static_cast<std::ptrdiff_t>(n)};
  }
  nlohmann::json settings() const override { return nlohmann::json::object(); }

 private:
  std::vector<std::int32_t> tokens_;
};

// The model's drafter: the default chain proposal, and what it observed.
class RecordingDrafter final : public Drafter {
 public:
  std::string_view name() const override { return "recording"; }
  DraftPlan next_plan() override { return {LayerPlan::full(2), -1}; }
  void observe(const Draft& draft, const Verdict& verdict) override {
    observed.push_back({draft, verdict});
  }
  std::vector<std::pair<Draft, Verdict>> observed;
};

struct SourcedRound {
  std::unique_ptr<SourcedDrafter> drafter;
  RecordingDrafter* model = nullptr;
};

SourcedRound sourced_drafter(std::vector<std::int32_t> proposal, SourcedDrafterOptions options) {
  std::vector<std::unique_ptr<DraftSource>> sources;
  sources.push_back(std::make_unique<FixedSource>(std::move(proposal)));
  auto model = std::make_unique<RecordingDrafter>();
  SourcedRound round;
  round.model = model.get();
  round.drafter = std::make_unique<SourcedDrafter>(std::move(sources), std::move(model), options);
  return round;
}

std::vector<std::int32_t> tokens_of(const Draft& draft) {
  return {draft.tokens().begin(), draft.tokens().end()};
}

TEST(SourcedDrafter, AloneTheSourceDraftsTheRoundWithoutTheModel) {
  SourcedRound round = sourced_drafter({7, 9, 4}, {});
  ScriptedContext context({7, 8}, LayerPlan::full(2));
  Draft draft;
  round.drafter->propose(context, draft);
  EXPECT_TRUE(context.parents.empty());  // no draft step
  EXPECT_TRUE(draft.from_lookup());
  EXPECT_TRUE(draft.is_chain());
  EXPECT_EQ(tokens_of(draft), (std::vector<std::int32_t>{7, 9, 4}));
  round.drafter->observe(draft, Verdict{{0}, 5, 0});
  EXPECT_TRUE(round.model->observed.empty());
  const nlohmann::json state = round.drafter->state()["fixed"];
  EXPECT_EQ(state["rounds"], 1);
  EXPECT_EQ(state["drafted"], 3);
  EXPECT_EQ(state["accepted"], 1);
  EXPECT_EQ(state["tree_rounds"], 0);
}

// The model drafts 7 8; the proposal 7 9 4 follows node 0 (7) and branches off it: 9 and 4 are
// sourced nodes, and one forward verifies the tree. The model's drafter observes its own nodes.
TEST(SourcedDrafter, InTreeRoundsTheProposalIsAGraftedBranch) {
  SourcedRound round = sourced_drafter({7, 9, 4}, {.tree = true});
  ScriptedContext context({7, 8}, LayerPlan::full(2));
  Draft draft;
  round.drafter->propose(context, draft);
  EXPECT_EQ(context.parents, (std::vector<int>{Draft::kRoot, 0}));
  EXPECT_FALSE(draft.from_lookup());
  EXPECT_EQ(tokens_of(draft), (std::vector<std::int32_t>{7, 8, 9, 4}));
  EXPECT_EQ(std::vector<int>(draft.parents().begin(), draft.parents().end()),
            (std::vector<int>{Draft::kRoot, 0, 0, 2}));
  EXPECT_EQ(draft.drawn(), 2);
  EXPECT_EQ(draft.sourced(), 2);
  // The target takes 7 and 9, then says 6: the model's view is 7 accepted, then 9.
  round.drafter->observe(draft, Verdict{{0, 2}, 6, 0});
  ASSERT_EQ(round.model->observed.size(), 1u);
  const auto& [own_draft, own_verdict] = round.model->observed[0];
  EXPECT_EQ(tokens_of(own_draft), (std::vector<std::int32_t>{7, 8}));
  EXPECT_EQ(own_draft.sourced(), 0);
  EXPECT_EQ(own_verdict.accepted, (std::vector<int>{0}));
  EXPECT_EQ(own_verdict.next_token, 9);
  const nlohmann::json state = round.drafter->state()["fixed"];
  EXPECT_EQ(state["drafted"], 3);
  EXPECT_EQ(state["accepted"], 2);
  EXPECT_EQ(state["tree_rounds"], 1);
  EXPECT_EQ(state["sourced_nodes"], 2);
  EXPECT_EQ(state["sourced_accepted"], 1);

  // The round's room bounds the tree: with 3 nodes, only 9 is grafted.
  context.parents.clear();
  context.room = 3;
  Draft small;
  round.drafter->propose(context, small);
  EXPECT_EQ(tokens_of(small), (std::vector<std::int32_t>{7, 8, 9}));
  // A proposal the model's chain holds entirely adds no node, and the model sees the whole draft.
  SourcedRound same = sourced_drafter({7, 8}, {.tree = true});
  ScriptedContext again({7, 8}, LayerPlan::full(2));
  Draft chain;
  same.drafter->propose(again, chain);
  EXPECT_EQ(chain.sourced(), 0);
  same.drafter->observe(chain, Verdict{{0, 1}, 3, 0});
  ASSERT_EQ(same.model->observed.size(), 1u);
  EXPECT_EQ(same.model->observed[0].second.accepted, (std::vector<int>{0, 1}));
  EXPECT_EQ(same.drafter->state()["fixed"]["accepted"], 2);
}

// min_reach: token d is proposed while the estimated chance of accepting tokens 0..d, a product
// of (taken + 1) / (offered + 2), is at least min_reach. Untried: 1/2, then 1/4.
TEST(SourcedDrafter, ProposalsStopWhereTheirRunningAcceptanceFallsBelowMinReach) {
  SourcedRound round = sourced_drafter({7, 9, 4}, {.tree = false, .min_reach = 0.4});
  ScriptedContext context({5}, LayerPlan::full(2));
  Draft draft;
  round.drafter->propose(context, draft);
  EXPECT_EQ(tokens_of(draft), (std::vector<std::int32_t>{7}));
  round.drafter->observe(draft, Verdict{{}, 3, 0});  // rejected: depth 0 now 1/3
  EXPECT_NEAR(round.drafter->state()["fixed"]["reach"][0].get<double>(), 1.0 / 3.0, 1e-12);
  Draft next;
  round.drafter->propose(context, next);
  EXPECT_FALSE(next.from_lookup());  // nothing proposed: the model drafts
  EXPECT_EQ(tokens_of(next), (std::vector<std::int32_t>{5}));
  EXPECT_THROW((void)sourced_drafter({1}, {.min_reach = 1.5}), Error);
  EXPECT_THROW((void)sourced_drafter({1}, {.min_reach = -0.1}), Error);
}

}  // namespace
}  // namespace selfspec
