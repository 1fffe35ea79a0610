// Lookup drafts (draft/ngram_lookup.hpp, draft/lookup_source.hpp, draft/sourced_drafter.hpp):
//  * ngram_lookup: the longest recurring suffix wins, its latest earlier occurrence, the
//    continuation clipped at max_tokens and at the end of the sequence, nothing without a match
//    of min_ngram tokens, options out of range refused;
//  * SourcedDrafter: a lookup match becomes a chain drafted with no draft step (marked as a lookup,
//    within the round's room), a miss is drafted by the model's drafter, sources are tried in
//    order, and each source's rounds count in its own state (the model's drafter learns from its
//    own rounds).
#include "draft/ngram_lookup.hpp"
#include "draft/lookup_source.hpp"
#include "draft/sourced_drafter.hpp"

#include "core/error.hpp"
#include "draft/layer_skip_drafter.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace selfspec {
namespace {

using Tokens = std::vector<std::int32_t>;

TEST(NgramLookup, TheLongestRecurringSuffixAndItsLatestOccurrenceWin) {
  //                 0  1  2  3  4  5  6  7  8  9 10 11 12
  const Tokens seq = {5, 1, 2, 3, 9, 1, 2, 3, 7, 8, 0, 2, 3};
  // Suffix "2 3" occurs at 2 and 6; the latest (6) is followed by 7 8 0 2.
  EXPECT_EQ(ngram_lookup(seq, {3, 2, 4}), (Tokens{7, 8, 0, 2}));
  EXPECT_EQ(ngram_lookup(seq, {3, 2, 2}), (Tokens{7, 8}));
  // "0 2 3" (n 3) never recurred; with min 3 there is no match.
  EXPECT_TRUE(ngram_lookup(seq, {3, 3, 4}).empty());
  // A longer suffix beats a later, shorter one: "1 2 3" at 1 and 5, then "2 3" alone.
  const Tokens longer = {1, 2, 3, 4, 6, 2, 3, 5, 1, 2, 3};
  EXPECT_EQ(ngram_lookup(longer, {3, 2, 3}), (Tokens{4, 6, 2}));
  EXPECT_EQ(ngram_lookup(longer, {2, 2, 3}), (Tokens{5, 1, 2}));
  // The continuation stops at the end of the sequence (it may run into the suffix itself).
  EXPECT_EQ(ngram_lookup(Tokens{4, 4, 4, 4}, {2, 1, 5}), (Tokens{4}));
  EXPECT_EQ(ngram_lookup(Tokens{1, 2, 1, 2}, {2, 2, 8}), (Tokens{1, 2}));
}

TEST(NgramLookup, NothingWithoutAMatchOrRoom) {
  EXPECT_TRUE(ngram_lookup(Tokens{}, {3, 1, 4}).empty());
  EXPECT_TRUE(ngram_lookup(Tokens{7}, {3, 1, 4}).empty());
  EXPECT_TRUE(ngram_lookup(Tokens{1, 2, 3, 4}, {3, 1, 4}).empty());
  EXPECT_TRUE(ngram_lookup(Tokens{1, 2, 1, 2}, {2, 2, 0}).empty());
  EXPECT_THROW(ngram_lookup(Tokens{1}, {3, 0, 4}), Error);
  EXPECT_THROW(ngram_lookup(Tokens{1}, {1, 2, 4}), Error);
  EXPECT_THROW(ngram_lookup(Tokens{1}, {2, 1, -1}), Error);
}

// Rank 0's side of a round: the sequence so far, the room, and a script for draft steps.
class LookupContext final : public DraftContext {
 public:
  const DraftPlan& plan() const override { return plan_; }
  DraftStep step(const Draft& draft, int) override {
    ++steps;
    return {static_cast<std::int32_t>(40 + draft.drawn()), 0.5, draft.drawn() + 1 < 2, {}};
  }
  bool is_root() const override { return true; }
  std::int64_t generated() const override { return 0; }
  void share(std::span<std::byte>) override { ++shares; }
  DraftMatch score_plan(const LayerPlan&, int) override { return {}; }
  void history(std::vector<std::int32_t>& out) const override { out = sequence; }
  int draft_room() const override { return room; }

  Tokens sequence;
  int room = 8;
  int steps = 0;
  int shares = 0;

 private:
  DraftPlan plan_{LayerPlan::full(2), -1};
};

std::vector<std::unique_ptr<DraftSource>> lookup_sources(const NgramLookupOptions& options) {
  std::vector<std::unique_ptr<DraftSource>> sources;
  sources.push_back(make_lookup_source(options));
  return sources;
}

TEST(SourcedDrafter, ALookupMatchIsAChainWithoutDraftStepsAMissIsTheModelsDraft) {
  SourcedDrafter drafter(lookup_sources({3, 2, 5}),
                         std::make_unique<LayerSkipDrafter>(LayerPlan::full(2), "inner"));
  EXPECT_TRUE(drafter.point_mass_drafts());
  EXPECT_EQ(drafter.name(), "lookup+inner");
  LookupContext context;
  context.sequence = {1, 2, 3, 4, 5, 6, 1, 2, 3};
  Draft draft;
  drafter.propose(context, draft);
  EXPECT_EQ(context.steps, 0);
  EXPECT_EQ(context.shares, 1);
  EXPECT_TRUE(draft.from_lookup());
  EXPECT_TRUE(draft.is_chain());
  EXPECT_EQ(Tokens(draft.tokens().begin(), draft.tokens().end()), (Tokens{4, 5, 6, 1, 2}));
  Verdict verdict;
  verdict.accepted = {0, 1};
  drafter.observe(draft, verdict);

  // The round's room bounds the lookup.
  context.room = 2;
  Draft short_draft;
  drafter.propose(context, short_draft);
  EXPECT_EQ(Tokens(short_draft.tokens().begin(), short_draft.tokens().end()), (Tokens{4, 5}));

  // No recurring suffix: the wrapped drafter's steps.
  context.sequence = {1, 2, 3, 4};
  Draft miss;
  drafter.propose(context, miss);
  EXPECT_EQ(context.steps, 2);
  EXPECT_FALSE(miss.from_lookup());
  EXPECT_EQ(Tokens(miss.tokens().begin(), miss.tokens().end()), (Tokens{40, 41}));
  drafter.observe(miss, verdict);

  const nlohmann::json state = drafter.state();
  EXPECT_EQ(state["lookup"]["rounds"], 1);
  EXPECT_EQ(state["lookup"]["drafted"], 5);
  EXPECT_EQ(state["lookup"]["accepted"], 2);
  EXPECT_EQ(state["lookup"]["max_ngram"], 3);
}

TEST(SourcedDrafter, RefusesOptionsOutOfRange) {
  EXPECT_THROW(make_lookup_source({3, 2, 0}), Error);
  EXPECT_THROW(make_lookup_source({3, 2, DraftSource::kMaxTokens + 1}), Error);
  EXPECT_THROW(make_lookup_source({1, 2, 4}), Error);
  EXPECT_THROW(SourcedDrafter(lookup_sources({3, 2, 4}), nullptr), Error);
}

// A source that proposes a fixed chain, or nothing.
class FixedSource final : public DraftSource {
 public:
  explicit FixedSource(Tokens tokens) : tokens_(std::move(tokens)) {}
  std::string_view name() const override { return "fixed"; }
  std::vector<std::int32_t> propose(std::span<const std::int32_t> /*history*/, int room) override {
    return Tokens(tokens_.begin(),
                  tokens_.begin() + std::min<std::ptrdiff_t>(room, std::ssize(tokens_)));
  }
  nlohmann::json settings() const override { return {{"tokens", tokens_.size()}}; }

 private:
  Tokens tokens_;
};

// Sources are tried in order (llama.cpp's implementations): the first that proposes drafts the
// round, each keeps its own statistics, and the model drafts when none does.
TEST(SourcedDrafter, TheFirstSourceThatProposesDraftsTheRound) {
  std::vector<std::unique_ptr<DraftSource>> sources;
  sources.push_back(make_lookup_source({3, 2, 5}));
  sources.push_back(std::make_unique<FixedSource>(Tokens{7, 8}));
  SourcedDrafter drafter(std::move(sources),
                         std::make_unique<LayerSkipDrafter>(LayerPlan::full(2), "inner"));
  EXPECT_EQ(drafter.name(), "lookup+fixed+inner");
  LookupContext context;
  Verdict verdict;
  verdict.accepted = {0};

  context.sequence = {1, 2, 3, 9, 1, 2, 3};  // the lookup matches
  Draft looked_up;
  drafter.propose(context, looked_up);
  EXPECT_EQ(Tokens(looked_up.tokens().begin(), looked_up.tokens().end()), (Tokens{9, 1, 2, 3}));
  drafter.observe(looked_up, verdict);

  context.sequence = {1, 2, 3, 4};  // no match: the second source
  Draft fixed;
  drafter.propose(context, fixed);
  EXPECT_TRUE(fixed.from_lookup());
  EXPECT_EQ(Tokens(fixed.tokens().begin(), fixed.tokens().end()), (Tokens{7, 8}));
  drafter.observe(fixed, verdict);
  EXPECT_EQ(context.steps, 0);

  const nlohmann::json state = drafter.state();
  EXPECT_EQ(state["lookup"]["rounds"], 1);
  EXPECT_EQ(state["lookup"]["drafted"], 4);
  EXPECT_EQ(state["fixed"]["rounds"], 1);
  EXPECT_EQ(state["fixed"]["drafted"], 2);
  EXPECT_EQ(state["fixed"]["accepted"], 1);
}

}  // namespace
}  // namespace selfspec
