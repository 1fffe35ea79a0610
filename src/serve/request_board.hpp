// Rank 0's requests in `selfspec serve`: a bounded queue and the running requests, shared by the
// HTTP handlers (which submit a request and wait on it) and the engine thread (which takes queued
// requests into the batch, hands over each token as it is chosen and ends each request). A
// request can be cancelled from any thread (its client went away, or its text hit a stop string):
// a queued one never starts; a running one stops at its next step (the batch reads cancelled()
// through its generation options' interrupt hook, and the stop travels to every rank).
//
// Draining (SIGTERM): no new request is accepted, the queued and running ones finish. A failed
// engine ends every request with its error, so no client waits for ever.
#pragma once

#include "decode/generation_result.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace selfspec::serve {

using Clock = std::chrono::steady_clock;

// What every rank needs of a request besides its prompt (serve_feed.hpp sends it).
struct RequestSettings {
  std::int64_t max_tokens = 16;
  double temperature = 1.0;
  double top_p = 1.0;
  std::int64_t top_k = 0;
  std::uint64_t seed = 0;
  bool speculate = true;
  int max_draft = -1;  // a cap on the draft length below the configuration's (-1: none)
  bool ignore_eos = false;
};

enum class RequestState { kQueued, kRunning, kFinished, kFailed };

// One request on rank 0, between its handler and the engine thread.
class ServedRequest {
 public:
  ServedRequest(std::int64_t id, std::vector<std::int32_t> prompt, RequestSettings settings);

  std::int64_t id() const { return id_; }
  const std::vector<std::int32_t>& prompt() const { return prompt_; }
  const RequestSettings& settings() const { return settings_; }
  Clock::time_point arrival() const { return arrival_; }

  // Engine thread.
  void start();
  void add_token(std::int32_t token);
  void finish(GenerationResult&& result);
  void fail(std::string message);

  // Any thread: stop it (a queued request never starts, a running one stops at its next step).
  void cancel();
  bool cancelled() const;

  // The handler: waits until there are tokens past the first `seen`, the request ended, or
  // `timeout` passed; returns the new tokens (with the times they were chosen).
  struct Update {
    std::vector<std::int32_t> tokens;
    std::vector<Clock::time_point> times;
    RequestState state = RequestState::kQueued;
  };
  Update wait(std::size_t seen, std::chrono::milliseconds timeout) const;

  RequestState state() const;
  std::int64_t token_count() const;
  // After kFinished: the run's result, tokens included; after kFailed: why.
  const GenerationResult& result() const { return result_; }
  const std::string& error() const { return error_; }

 private:
  const std::int64_t id_;
  const std::vector<std::int32_t> prompt_;
  const RequestSettings settings_;
  const Clock::time_point arrival_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  RequestState state_ = RequestState::kQueued;
  bool cancelled_ = false;
  std::vector<std::int32_t> tokens_;
  std::vector<Clock::time_point> times_;
  GenerationResult result_;
  std::string error_;
};

using RequestHandle = std::shared_ptr<ServedRequest>;

enum class Refusal { kQueueFull, kDraining, kFailed };

class RequestBoard {
 public:
  // `max_queued`: requests waiting for a slot beyond the running ones (more are refused).
  explicit RequestBoard(std::int64_t max_queued);

  // A handler: queues the request, or says why not.
  std::variant<RequestHandle, Refusal> submit(std::vector<std::int32_t> prompt,
                                              RequestSettings settings);

  // The engine thread: at most `room` queued requests, now running (cancelled ones are dropped
  // and ended). With `idle`, waits up to `wait` for one to arrive (or for draining).
  std::vector<RequestHandle> take(std::int64_t room, bool idle, std::chrono::milliseconds wait);
  // A running request by id (nullptr once it ended).
  RequestHandle running(std::int64_t id) const;
  // The engine thread: request `id` ended (its handle already says how).
  void ended(std::int64_t id);

  // Stop accepting; queued and running requests still finish. drained(): and none is queued.
  void drain();
  bool draining() const;
  bool drained() const;
  // The engine failed: every queued and running request fails with `message`, and new ones are
  // refused.
  void fail_all(const std::string& message);

  std::int64_t queued() const;
  std::int64_t running_count() const;
  // KV slots the running requests hold (prompt + generated tokens).
  std::int64_t kv_tokens() const;

 private:
  const std::int64_t max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<RequestHandle> queue_;
  std::map<std::int64_t, RequestHandle> running_;
  std::int64_t next_id_ = 0;
  bool draining_ = false;
  std::optional<std::string> failed_;
};

}  // namespace selfspec::serve
