// Where the batched speculative loop (decode/speculative_batch.hpp) gets its requests while it
// runs: a list known in advance (`bench-serving`, arriving by a clock), or requests that reach
// rank 0 over HTTP (`selfspec serve`, serve/serve_feed.hpp), which rank 0 then sends to the
// other ranks. The loop asks between passes, on every rank at the same point, so a feed may run
// collectives (rank 0 broadcasting what it admits) and every rank admits the same requests into
// the same slots.
#pragma once

#include "decode/generation_options.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace selfspec {

struct SpeculativeRequest {
  std::vector<std::int32_t> prompt;  // non-empty
  // This request's budget, sampling (its own seeded stream), end-of-sequence ids, trees and draft
  // forward; prefill_chunk is capped at the batch's pass_tokens. `interrupt` (rank 0) ends the
  // request after the tokens already chosen, on every rank: a cancelled or stopped request.
  GenerationOptions options;
  bool speculate = true;  // false: plain decoding for this request
};

// A request that joins the batch, under the feed's id (the hooks and MakeSpeculators see it).
struct FeedArrival {
  std::int64_t id = 0;
  SpeculativeRequest request;
};

class RequestFeed {
 public:
  virtual ~RequestFeed() = default;
  // Every rank, at the same point between passes: the requests that join now, at most `room`
  // (the free slots; every rank knows it). `idle`: nothing runs, so the feed may wait for an
  // arrival, though not past the collectives' deadline (an empty list is a valid answer).
  // nullopt: the feed has ended; the loop finishes the running requests and returns.
  virtual std::optional<std::vector<FeedArrival>> next(std::int64_t room, bool idle) = 0;
};

}  // namespace selfspec
