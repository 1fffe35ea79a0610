// The batched speculative loop's request feed in `selfspec serve` (decode/request_feed.hpp): on
// rank 0 it takes queued requests from the request board (serve/request_board.hpp) into the free
// slots and broadcasts them, prompt and settings, so that every rank admits the same requests into
// the same slots; the other ranks receive them. When nothing runs, rank 0 waits briefly for an
// arrival and then broadcasts an empty step anyway, so that the other ranks' collectives never
// pass their deadline on an idle server (and find out within a beat if rank 0 is gone). The feed
// ends when the board is drained (SIGTERM): the loop finishes the running requests and returns.
//
// On rank 0 each request's interrupt hook reads its cancellation (a client that went away, a stop
// string), so the request ends at its next step on every rank.
#pragma once

#include "comm/communicator.hpp"
#include "decode/request_feed.hpp"
#include "serve/request_board.hpp"

#include <chrono>
#include <functional>
#include <map>

namespace selfspec::serve {

// The interrupt value of a cancelled request (a stop signal's place in the control message; no
// signal has this number).
inline constexpr int kCancelledSignal = 255;

// A request's SpeculativeRequest from its prompt and settings (the same on every rank).
using BuildRequest = std::function<SpeculativeRequest(const std::vector<std::int32_t>& prompt,
                                                      const RequestSettings& settings)>;

class ServeFeed final : public RequestFeed {
 public:
  // `board`: rank 0's; nullptr on the other ranks. The feed ends once the board is drained.
  ServeFeed(Communicator& comm, RequestBoard* board, BuildRequest build,
            std::chrono::milliseconds idle_wait = std::chrono::milliseconds(250));

  std::optional<std::vector<FeedArrival>> next(std::int64_t room, bool idle) override;

  // A running request's settings (every rank), until forget(id).
  const RequestSettings& settings(std::int64_t id) const;
  void forget(std::int64_t id) { settings_.erase(id); }

 private:
  struct Wire {
    std::int64_t id = 0;
    std::vector<std::int32_t> prompt;
    RequestSettings settings;
  };
  // Rank 0 decides the step (nullopt: the feed ended); every rank gets it.
  std::optional<std::vector<Wire>> exchange(std::int64_t room, bool idle);

  Communicator& comm_;
  RequestBoard* board_;
  BuildRequest build_;
  std::chrono::milliseconds idle_wait_;
  std::map<std::int64_t, RequestSettings> settings_;
  std::map<std::int64_t, RequestHandle> handles_;  // rank 0: the requests just taken
};

}  // namespace selfspec::serve
