// Rank 0's request board (serve/request_board.hpp) and the serving feed (serve/serve_feed.hpp):
//  * the queue is bounded (a full queue and a draining board refuse), requests are taken in
//    arrival order up to the room given, a cancelled queued request never starts;
//  * a handler waiting on its request sees every token in order and the end, or the engine's
//    failure (fail_all), never a hang;
//  * the feed hands every rank the same requests (prompt and settings, ids included) over a real
//    two-rank exchange, sets rank 0's interrupt from the request's cancellation, and ends on
//    every rank once the board is drained.
#include "serve/request_board.hpp"
#include "serve/serve_feed.hpp"

#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "tests/support/thread_comm.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

namespace selfspec::serve {
namespace {

using namespace std::chrono_literals;

RequestSettings settings_with(std::int64_t max_tokens, std::uint64_t seed = 0) {
  RequestSettings s;
  s.max_tokens = max_tokens;
  s.seed = seed;
  return s;
}

RequestHandle submitted(RequestBoard& board, std::vector<std::int32_t> prompt,
                        RequestSettings settings = settings_with(4)) {
  auto outcome = board.submit(std::move(prompt), settings);
  EXPECT_TRUE(std::holds_alternative<RequestHandle>(outcome));
  return std::get<RequestHandle>(outcome);
}

TEST(RequestBoard, ABoundedQueueTakenInOrderUpToTheRoom) {
  RequestBoard board(3);
  const RequestHandle a = submitted(board, {1});
  const RequestHandle b = submitted(board, {2});
  const RequestHandle c = submitted(board, {3});
  EXPECT_EQ(std::get<Refusal>(board.submit({4}, {})), Refusal::kQueueFull);
  EXPECT_EQ(board.queued(), 3);
  const std::vector<RequestHandle> first = board.take(2, false, 0ms);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0], a);
  EXPECT_EQ(first[1], b);
  EXPECT_EQ(a->state(), RequestState::kRunning);
  EXPECT_EQ(board.running_count(), 2);
  EXPECT_EQ(board.running(a->id()), a);
  // Room in the queue again.
  EXPECT_TRUE(std::holds_alternative<RequestHandle>(board.submit({5}, {})));
  board.ended(a->id());
  EXPECT_EQ(board.running(a->id()), nullptr);
  EXPECT_EQ(board.take(5, false, 0ms).front(), c);
  EXPECT_NE(a->id(), b->id());
}

TEST(RequestBoard, ACancelledQueuedRequestNeverStarts) {
  RequestBoard board(4);
  const RequestHandle a = submitted(board, {1});
  const RequestHandle b = submitted(board, {2});
  a->cancel();
  const std::vector<RequestHandle> taken = board.take(2, false, 0ms);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken.front(), b);
  EXPECT_EQ(a->state(), RequestState::kFailed);
  EXPECT_THAT(a->error(), ::testing::HasSubstr("cancelled"));
}

TEST(RequestBoard, AnIdleTakeWaitsForAnArrivalOrGivesUpAfterItsWait) {
  RequestBoard board(4);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(board.take(1, true, 50ms).empty());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 45ms);
  std::jthread later([&] {
    std::this_thread::sleep_for(30ms);
    submitted(board, {7});
  });
  const std::vector<RequestHandle> taken = board.take(1, true, 5s);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken.front()->prompt(), std::vector<std::int32_t>{7});
}

TEST(RequestBoard, AHandlerSeesEveryTokenInOrderAndTheEnd) {
  RequestBoard board(1);
  const RequestHandle request = submitted(board, {1, 2});
  board.take(1, false, 0ms);
  std::jthread engine([&] {
    for (std::int32_t t = 10; t < 20; ++t) {
      request->add_token(t);
      std::this_thread::sleep_for(1ms);
    }
    GenerationResult result;
    result.stopped_on_eos = true;
    request->finish(std::move(result));
  });
  std::vector<std::int32_t> seen;
  RequestState state = RequestState::kRunning;
  for (int polls = 0; polls < 10000 && state == RequestState::kRunning; ++polls) {
    const ServedRequest::Update update = request->wait(seen.size(), 100ms);
    seen.insert(seen.end(), update.tokens.begin(), update.tokens.end());
    EXPECT_EQ(update.tokens.size(), update.times.size());
    state = update.state;
  }
  engine.join();
  const ServedRequest::Update rest = request->wait(seen.size(), 0ms);
  seen.insert(seen.end(), rest.tokens.begin(), rest.tokens.end());
  EXPECT_EQ(state, RequestState::kFinished);
  EXPECT_EQ(seen, (std::vector<std::int32_t>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_TRUE(request->result().stopped_on_eos);
}

TEST(RequestBoard, DrainingAndFailureRefuseNewRequestsAndEndWaitingOnes) {
  RequestBoard board(4);
  const RequestHandle first = submitted(board, {1});
  const RequestHandle second = submitted(board, {2});
  board.take(1, false, 0ms);  // `first` runs; `second` stays queued
  board.drain();
  EXPECT_TRUE(board.draining());
  EXPECT_FALSE(board.drained());  // `second` is still queued, and will still run
  EXPECT_EQ(std::get<Refusal>(board.submit({3}, {})), Refusal::kDraining);
  EXPECT_EQ(board.take(1, false, 0ms).front(), second);
  EXPECT_TRUE(board.drained());
  board.fail_all("the engine failed: boom");
  EXPECT_EQ(first->state(), RequestState::kFailed);
  EXPECT_EQ(second->state(), RequestState::kFailed);
  EXPECT_THAT(second->error(), ::testing::HasSubstr("boom"));
  EXPECT_EQ(second->wait(0, 5s).state, RequestState::kFailed);  // no wait: it ended
  EXPECT_EQ(std::get<Refusal>(board.submit({4}, {})), Refusal::kFailed);
  EXPECT_THROW(RequestBoard(-1), Error);
}

SpeculativeRequest build(const std::vector<std::int32_t>& prompt, const RequestSettings& s) {
  SpeculativeRequest request;
  request.prompt = prompt;
  request.options.max_new_tokens = s.max_tokens;
  request.options.sampling.seed = s.seed;
  request.options.sampling.temperature = s.temperature;
  request.speculate = s.speculate;
  return request;
}

TEST(ServeFeed, EveryRankGetsTheSameRequestsAndTheEnd) {
  RequestBoard board(8);
  RequestSettings special = settings_with(9, 42);
  special.temperature = 0.7;
  special.top_k = 5;
  special.speculate = false;
  special.max_draft = 3;
  special.ignore_eos = true;
  const RequestHandle a = submitted(board, {5, 6, 7}, special);
  const RequestHandle b = submitted(board, {8}, settings_with(2, 1));
  const RequestHandle c = submitted(board, {9, 9}, settings_with(3, 2));
  std::vector<std::vector<std::vector<std::int64_t>>> ids(2);  // rank -> step -> ids
  std::vector<std::vector<SpeculativeRequest>> got(2);
  std::vector<RequestSettings> follower_settings;
  testing::run_ranks(2, false, [&](testing::ThreadComm& comm) {
    const int rank = comm.rank();
    ServeFeed feed(comm, rank == 0 ? &board : nullptr, build, 20ms);
    for (int step = 0; step < 3; ++step) {
      std::optional<std::vector<FeedArrival>> arrivals = feed.next(2, step == 2);
      ASSERT_TRUE(arrivals);
      ids[rank].emplace_back();
      for (FeedArrival& arrival : *arrivals) {
        ids[rank].back().push_back(arrival.id);
        EXPECT_EQ(static_cast<bool>(arrival.request.options.interrupt), rank == 0);
        got[rank].push_back(std::move(arrival.request));
      }
    }
    if (rank == 1) follower_settings.push_back(feed.settings(a->id()));
    feed.forget(a->id());
    EXPECT_THROW(feed.settings(a->id()), Error);
    if (rank == 0) board.drain();
    comm.barrier();
    EXPECT_FALSE(feed.next(2, true).has_value());
  });
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_EQ(ids[0][0], (std::vector<std::int64_t>{a->id(), b->id()}));
  EXPECT_EQ(ids[0][1], (std::vector<std::int64_t>{c->id()}));
  EXPECT_TRUE(ids[0][2].empty());  // an idle step with nothing queued: a heartbeat
  ASSERT_EQ(got[1].size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[0][i].prompt, got[1][i].prompt);
    EXPECT_EQ(got[0][i].options.max_new_tokens, got[1][i].options.max_new_tokens);
    EXPECT_EQ(got[0][i].options.sampling.seed, got[1][i].options.sampling.seed);
  }
  EXPECT_EQ(got[1][0].prompt, (std::vector<std::int32_t>{5, 6, 7}));
  EXPECT_EQ(got[1][0].options.sampling.temperature, 0.7);
  EXPECT_FALSE(got[1][0].speculate);
  ASSERT_EQ(follower_settings.size(), 1u);
  EXPECT_EQ(follower_settings[0].top_k, 5);
  EXPECT_EQ(follower_settings[0].max_draft, 3);
  EXPECT_TRUE(follower_settings[0].ignore_eos);
  // Rank 0's interrupt follows the request's cancellation.
  EXPECT_EQ(got[0][1].options.interrupt(), 0);
  b->cancel();
  EXPECT_EQ(got[0][1].options.interrupt(), kCancelledSignal);
}

TEST(ServeFeed, TheBoardBelongsToRankZeroOnly) {
  LocalComm comm;
  EXPECT_THROW(ServeFeed(comm, nullptr, build), Error);
}

}  // namespace
}  // namespace selfspec::serve
