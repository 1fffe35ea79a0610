// The pieces of the one decoding loop on a single rank: the rank-0 channel's end-of-generation
// rules, plain decoding as rounds without a draft, and what a drafter sees of each round.
#include "comm/local_comm.hpp"
#include "decode/decoder.hpp"
#include "decode/rank0_channel.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace selfspec::testing {
namespace {

struct ChannelFixture {
  LocalComm comm;
  GenerationOptions options;
  std::vector<std::int32_t> seen;
  TokenCallback on_token = [this](std::int32_t token) { seen.push_back(token); };
  std::vector<std::int32_t> tokens;
};

TEST(Rank0Channel, EmitStopsAfterAnEndOfSequenceIdOrTheLastTokenOfTheBudget) {
  ChannelFixture f;
  f.options.max_new_tokens = 5;
  f.options.eos_ids = {2};
  Rank0Channel channel(f.comm, f.options, f.on_token, f.tokens);
  ControlMessage message;
  const std::vector<std::int32_t> first = {7, 8};
  EXPECT_FALSE(channel.emit(first, message));
  EXPECT_EQ(message.n_tokens, 2u);
  EXPECT_EQ(channel.remaining(), 3);
  // The EOS ends the step: tokens after it are neither emitted nor sent.
  const std::vector<std::int32_t> with_eos = {9, 2, 4};
  EXPECT_TRUE(channel.emit(with_eos, message));
  EXPECT_TRUE(channel.stopped_on_eos());
  EXPECT_EQ(message.n_tokens, 2u);
  EXPECT_EQ(f.tokens, (std::vector<std::int32_t>{7, 8, 9, 2}));
  EXPECT_EQ(f.seen, f.tokens);
  EXPECT_TRUE(channel.end_step(message, true));
  EXPECT_EQ(message.flags, kFlagEos);

  ChannelFixture g;
  g.options.max_new_tokens = 3;
  g.options.eos_ids = {2};
  g.options.ignore_eos = true;
  Rank0Channel budget(g.comm, g.options, g.on_token, g.tokens);
  const std::vector<std::int32_t> four = {2, 2, 5, 6};
  EXPECT_TRUE(budget.emit(four, message));
  EXPECT_FALSE(budget.stopped_on_eos());
  EXPECT_EQ(g.tokens, (std::vector<std::int32_t>{2, 2, 5}));
}

TEST(Rank0Channel, AStopRequestIsPolledOnlyWhenGenerationGoesOn) {
  ChannelFixture f;
  int polls = 0;
  f.options.interrupt = [&polls] { return ++polls >= 2 ? 15 : 0; };
  Rank0Channel channel(f.comm, f.options, f.on_token, f.tokens);
  ControlMessage message;
  EXPECT_TRUE(channel.end_step(message, true));
  EXPECT_EQ(polls, 0);
  EXPECT_EQ(message.flags, 0u);
  EXPECT_FALSE(channel.end_step(message, false));
  EXPECT_TRUE(channel.end_step(message, false));
  EXPECT_EQ(polls, 2);
  EXPECT_EQ(interrupt_signal_of(message.flags), 15);
}

TEST(Rank0Channel, BroadcastsNumberTheSteps) {
  ChannelFixture f;
  f.options.debug_sync = true;
  Rank0Channel channel(f.comm, f.options, f.on_token, f.tokens);
  KvCache kv = KvCache(cpu_backend(), 1, 1, 4, 8);
  ControlMessage message;
  message.step = 99;
  channel.broadcast(message, kv);
  EXPECT_EQ(message.step, 0u);
  channel.broadcast_tokens(message, kv);
  EXPECT_EQ(message.step, 1u);
  EXPECT_TRUE(f.tokens.empty()) << "rank 0's tokens come from emit(), not from its own message";
}

class DecodingLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    TinyModelSpec spec;
    spec.hidden = 64;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.layers = 4;
    spec.intermediate = 96;
    spec.vocab = 53;
    spec.scale = 2.0;
    write_tiny_checkpoint(spec, dir_.path());
    model_ = load_model(dir_.path(), comm_);
  }
  TempDir dir_;
  LocalComm comm_;
  std::unique_ptr<LlamaModel> model_;
  const std::vector<std::int32_t> prompt_ = {1, 9, 30, 4};
};

TEST_F(DecodingLoop, PlainDecodingIsOneVerificationOfOneTokenPerRound) {
  GenerationOptions options;
  options.max_new_tokens = 17;
  options.ignore_eos = true;
  KvCache kv = model_->make_kv_cache(32);
  const GenerationResult r = Decoder(*model_, comm_).generate(prompt_, options, kv);
  ASSERT_EQ(r.tokens.size(), 17u);
  EXPECT_EQ(r.stats.rounds, 16);
  EXPECT_EQ(r.stats.verify_forwards, 16);
  EXPECT_EQ(r.stats.draft_forwards, 0);
  EXPECT_EQ(r.stats.drafted, 0);
  EXPECT_EQ(r.stats.mean_accepted_length(), 1.0);
  EXPECT_EQ(r.timings.decode_forwards, 16);
  // The last token is emitted, never forwarded: prompt + 16 tokens are in the cache.
  EXPECT_EQ(kv.length(), static_cast<std::int64_t>(prompt_.size()) + 16);
}

// Records what the loop tells a drafter, and checks it against the run's statistics.
class RecordingDrafter final : public Drafter {
 public:
  explicit RecordingDrafter(LayerPlan plan) : plan_(std::move(plan)) {}
  std::string_view name() const override { return "recording"; }
  const LayerPlan& next_plan() override {
    ++plans;
    return plan_;
  }
  void observe(const Draft& draft, const Verdict& verdict) override {
    EXPECT_TRUE(draft.is_chain());
    EXPECT_LE(verdict.accepted_count(), draft.size());
    for (int i = 0; i < verdict.accepted_count(); ++i) {
      EXPECT_EQ(verdict.accepted[static_cast<std::size_t>(i)], i) << "a chain accepts a prefix";
      emitted.push_back(draft.token(i));
    }
    emitted.push_back(verdict.next_token);
    drafted += draft.size();
    accepted += verdict.accepted_count();
    ++observed;
  }
  int plans = 0;
  int observed = 0;
  std::int64_t drafted = 0;
  std::int64_t accepted = 0;
  std::vector<std::int32_t> emitted;

 private:
  LayerPlan plan_;
};

TEST_F(DecodingLoop, TheDrafterObservesEveryDraftedRoundAndItsVerdict) {
  GenerationOptions options;
  options.max_new_tokens = 30;
  options.ignore_eos = true;
  KvCache plain_kv = model_->make_kv_cache(40);
  const GenerationResult plain = Decoder(*model_, comm_).generate(prompt_, options, plain_kv);

  RecordingDrafter drafter(LayerPlan::skipping(4, std::vector<int>{1, 2}, std::vector<int>{2}));
  ControllerOptions controller_options;
  controller_options.kind = "fixed";
  controller_options.max_draft = 3;
  auto controller = make_draft_length_controller(controller_options);
  KvCache kv = model_->make_kv_cache(40);
  const GenerationResult r =
      Decoder(*model_, comm_, drafter, *controller).generate(prompt_, options, kv);
  EXPECT_EQ(r.tokens, plain.tokens);
  EXPECT_EQ(drafter.drafted, r.stats.drafted);
  EXPECT_EQ(drafter.accepted, r.stats.accepted);
  ASSERT_GT(r.stats.accepted, 0);
  ASSERT_LT(r.stats.accepted, r.stats.drafted) << "the draft must be rejected sometimes";
  // Every round drafts except possibly the last (the budget's final token needs no draft); each
  // round's plan is asked for once, at its start.
  EXPECT_GE(drafter.observed, r.stats.rounds - 1);
  EXPECT_EQ(drafter.plans, r.stats.rounds);
  // The verdicts' tokens are the output after the first token (the last verdict may be cut at
  // the budget, and the last round may not draft).
  const std::size_t n = std::min(drafter.emitted.size(), r.tokens.size() - 1);
  EXPECT_GE(n, r.tokens.size() - 2);
  EXPECT_TRUE(std::equal(drafter.emitted.begin(), drafter.emitted.begin() + static_cast<long>(n),
                         r.tokens.begin() + 1));
  EXPECT_EQ(kv.length(), static_cast<std::int64_t>(prompt_.size()) + 29);
}

}  // namespace
}  // namespace selfspec::testing
