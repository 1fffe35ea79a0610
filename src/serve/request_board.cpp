#include "serve/request_board.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace selfspec::serve {

ServedRequest::ServedRequest(std::int64_t id, std::vector<std::int32_t> prompt,
                             RequestSettings settings)
    : id_(id), prompt_(std::move(prompt)), settings_(settings), arrival_(Clock::now()) {}

void ServedRequest::start() {
  const std::lock_guard lock(mutex_);
  if (state_ == RequestState::kQueued) state_ = RequestState::kRunning;
  changed_.notify_all();
}

void ServedRequest::add_token(std::int32_t token) {
  const std::lock_guard lock(mutex_);
  tokens_.push_back(token);
  times_.push_back(Clock::now());
  changed_.notify_all();
}

void ServedRequest::finish(GenerationResult&& result) {
  const std::lock_guard lock(mutex_);
  if (state_ == RequestState::kFinished || state_ == RequestState::kFailed) return;
  result_ = std::move(result);
  state_ = RequestState::kFinished;
  changed_.notify_all();
}

void ServedRequest::fail(std::string message) {
  const std::lock_guard lock(mutex_);
  if (state_ == RequestState::kFinished || state_ == RequestState::kFailed) return;
  error_ = std::move(message);
  state_ = RequestState::kFailed;
  changed_.notify_all();
}

void ServedRequest::cancel() {
  const std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool ServedRequest::cancelled() const {
  const std::lock_guard lock(mutex_);
  return cancelled_;
}

ServedRequest::Update ServedRequest::wait(std::size_t seen,
                                          std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  const auto ready = [&] {
    return tokens_.size() > seen || state_ == RequestState::kFinished ||
           state_ == RequestState::kFailed;
  };
  changed_.wait_for(lock, timeout, ready);
  Update update;
  update.state = state_;
  if (tokens_.size() > seen) {
    update.tokens.assign(tokens_.begin() + static_cast<std::ptrdiff_t>(seen), tokens_.end());
    update.times.assign(times_.begin() + static_cast<std::ptrdiff_t>(seen), times_.end());
  }
  return update;
}

RequestState ServedRequest::state() const {
  const std::lock_guard lock(mutex_);
  return state_;
}

std::int64_t ServedRequest::token_count() const {
  const std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(tokens_.size());
}

RequestBoard::RequestBoard(std::int64_t max_queued) : max_queued_(max_queued) {
  SELFSPEC_CHECK(max_queued >= 0, "--max-queued {} < 0", max_queued);
}

std::variant<RequestHandle, Refusal> RequestBoard::submit(std::vector<std::int32_t> prompt,
                                                          RequestSettings settings) {
  const std::lock_guard lock(mutex_);
  if (failed_) return Refusal::kFailed;
  if (draining_) return Refusal::kDraining;
  if (static_cast<std::int64_t>(queue_.size()) >= max_queued_) return Refusal::kQueueFull;
  auto request = std::make_shared<ServedRequest>(next_id_++, std::move(prompt), settings);
  queue_.push_back(request);
  arrived_.notify_all();
  return request;
}

std::vector<RequestHandle> RequestBoard::take(std::int64_t room, bool idle,
                                              std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (idle) {
    arrived_.wait_for(lock, wait, [&] { return !queue_.empty() || draining_ || failed_; });
  }
  std::vector<RequestHandle> taken;
  while (!queue_.empty() && static_cast<std::int64_t>(taken.size()) < room) {
    RequestHandle request = std::move(queue_.front());
    queue_.pop_front();
    if (request->cancelled()) {
      request->fail("cancelled before it started");
      continue;
    }
    request->start();
    running_[request->id()] = request;
    taken.push_back(std::move(request));
  }
  return taken;
}

RequestHandle RequestBoard::running(std::int64_t id) const {
  const std::lock_guard lock(mutex_);
  const auto found = running_.find(id);
  return found == running_.end() ? nullptr : found->second;
}

void RequestBoard::ended(std::int64_t id) {
  const std::lock_guard lock(mutex_);
  running_.erase(id);
}

void RequestBoard::drain() {
  const std::lock_guard lock(mutex_);
  draining_ = true;
  arrived_.notify_all();
}

bool RequestBoard::draining() const {
  const std::lock_guard lock(mutex_);
  return draining_;
}

bool RequestBoard::drained() const {
  const std::lock_guard lock(mutex_);
  return draining_ && queue_.empty();
}

void RequestBoard::fail_all(const std::string& message) {
  const std::lock_guard lock(mutex_);
  failed_ = message;
  for (const RequestHandle& request : queue_) request->fail(message);
  for (const auto& [id, request] : running_) request->fail(message);
  queue_.clear();
  running_.clear();
  arrived_.notify_all();
}

std::int64_t RequestBoard::queued() const {
  const std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(queue_.size());
}

std::int64_t RequestBoard::running_count() const {
  const std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(running_.size());
}

std::int64_t RequestBoard::kv_tokens() const {
  const std::lock_guard lock(mutex_);
  std::int64_t total = 0;
  for (const auto& [id, request] : running_) {
    total += static_cast<std::int64_t>(request->prompt().size()) + request->token_count();
  }
  return total;
}

}  // namespace selfspec::serve
