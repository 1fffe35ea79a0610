// The rank-0 channel: end-of-generation rules (EOS, budget, stop requests) and step numbering.
#include "decode/rank0_channel.hpp"
#include "comm/local_comm.hpp"
#include "tests/support/model_fixture.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace selfspec::testing {
namespace {

struct ChannelFixture {
  LocalComm comm;
  GenerationOptions options;
  std::vector<std::int32_t> seen;
  TokenCallback on_token = [this](std::int32_t token) { seen.push_back(token); };
};

TEST(Rank0Channel, EmitStopsAfterAnEndOfSequenceIdOrTheLastTokenOfTheBudget) {
  ChannelFixture f;
  f.options.max_new_tokens = 5;
  f.options.eos_ids = {2};
  Rank0Channel channel(f.comm, f.options, f.on_token);
  const ControlMessage& message = channel.message();
  const std::vector<std::int32_t> first = {7, 8};
  EXPECT_FALSE(channel.emit(first));
  EXPECT_EQ(message.n_tokens, 2u);
  EXPECT_EQ(channel.remaining(), 3);
  // The EOS ends the step: tokens after it are neither emitted nor sent.
  const std::vector<std::int32_t> with_eos = {9, 2, 4};
  EXPECT_TRUE(channel.emit(with_eos));
  EXPECT_TRUE(channel.stopped_on_eos());
  EXPECT_EQ(message.n_tokens, 2u);
  EXPECT_EQ(channel.tokens(), (std::vector<std::int32_t>{7, 8, 9, 2}));
  EXPECT_EQ(f.seen, channel.tokens());
  EXPECT_TRUE(channel.end_step(true));
  EXPECT_EQ(message.flags, kFlagEos);

  ChannelFixture g;
  g.options.max_new_tokens = 3;
  g.options.eos_ids = {2};
  g.options.ignore_eos = true;
  Rank0Channel budget(g.comm, g.options, g.on_token);
  const std::vector<std::int32_t> four = {2, 2, 5, 6};
  EXPECT_TRUE(budget.emit(four));
  EXPECT_FALSE(budget.stopped_on_eos());
  EXPECT_EQ(budget.tokens(), (std::vector<std::int32_t>{2, 2, 5}));
}

TEST(Rank0Channel, AStopRequestIsPolledOnlyWhenGenerationGoesOn) {
  ChannelFixture f;
  int polls = 0;
  f.options.interrupt = [&polls] { return ++polls >= 2 ? 15 : 0; };
  Rank0Channel channel(f.comm, f.options, f.on_token);
  EXPECT_TRUE(channel.end_step(true));
  EXPECT_EQ(polls, 0);
  EXPECT_EQ(channel.message().flags, 0u);
  EXPECT_FALSE(channel.end_step(false));
  EXPECT_TRUE(channel.end_step(false));
  EXPECT_EQ(polls, 2);
  EXPECT_EQ(interrupt_signal_of(channel.message().flags), 15);
}

TEST(Rank0Channel, BroadcastsNumberTheSteps) {
  ChannelFixture f;
  f.options.debug_sync = true;
  Rank0Channel channel(f.comm, f.options, f.on_token);
  KvCache kv = KvCache(cpu_backend(), 1, 1, 4, 8);
  channel.message().step = 99;
  channel.message().n_tokens = 1;
  channel.broadcast(kv);
  EXPECT_EQ(channel.message().step, 0u);
  channel.broadcast_tokens(kv);
  EXPECT_EQ(channel.message().step, 1u);
  EXPECT_TRUE(channel.tokens().empty())
      << "rank 0's tokens come from emit(), not from its own message";
}

}  // namespace
}  // namespace selfspec::testing
