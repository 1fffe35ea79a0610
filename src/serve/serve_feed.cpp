#include "serve/serve_feed.hpp"

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <string>

namespace selfspec::serve {
namespace {

nlohmann::json to_json(const RequestSettings& s) {
  return {{"max_tokens", s.max_tokens},
          {"temperature", s.temperature},
          {"top_p", s.top_p},
          {"top_k", s.top_k},
          {"seed", s.seed},
          {"speculate", s.speculate},
          {"max_draft", s.max_draft},
          {"ignore_eos", s.ignore_eos}};
}

RequestSettings settings_from(const nlohmann::json& j) {
  RequestSettings s;
  s.max_tokens = j.at("max_tokens").get<std::int64_t>();
  s.temperature = j.at("temperature").get<double>();
  s.top_p = j.at("top_p").get<double>();
  s.top_k = j.at("top_k").get<std::int64_t>();
  s.seed = j.at("seed").get<std::uint64_t>();
  s.speculate = j.at("speculate").get<bool>();
  s.max_draft = j.at("max_draft").get<int>();
  s.ignore_eos = j.at("ignore_eos").get<bool>();
  return s;
}

}  // namespace

ServeFeed::ServeFeed(Communicator& comm, RequestBoard* board, BuildRequest build,
                     std::chrono::milliseconds idle_wait)
    : comm_(comm), board_(board), build_(std::move(build)), idle_wait_(idle_wait) {
  SELFSPEC_CHECK(comm.is_root() == (board != nullptr),
                 "the serving feed needs the request board on rank 0 and only there");
}

std::optional<std::vector<ServeFeed::Wire>> ServeFeed::exchange(std::int64_t room, bool idle) {
  // Header: {ended, bytes of the JSON payload}; the payload only when there is one.
  std::array<std::int64_t, 2> header{0, 0};
  std::string payload;
  if (comm_.is_root()) {
    handles_.clear();
    if (board_->drained()) {
      header[0] = 1;
    } else {
      nlohmann::json requests = nlohmann::json::array();
      for (RequestHandle& handle : board_->take(room, idle, idle_wait_)) {
        requests.push_back({{"id", handle->id()},
                            {"prompt", handle->prompt()},
                            {"settings", to_json(handle->settings())}});
        handles_[handle->id()] = std::move(handle);
      }
      if (!requests.empty()) payload = requests.dump();
      header[1] = static_cast<std::int64_t>(payload.size());
    }
  }
  comm_.broadcast(std::as_writable_bytes(std::span(header)), 0);
  if (header[0] != 0) return std::nullopt;
  std::vector<Wire> wires;
  if (header[1] == 0) return wires;
  payload.resize(static_cast<std::size_t>(header[1]));
  comm_.broadcast(std::as_writable_bytes(std::span(payload.data(), payload.size())), 0);
  for (const nlohmann::json& j : nlohmann::json::parse(payload)) {
    wires.push_back({j.at("id").get<std::int64_t>(),
                     j.at("prompt").get<std::vector<std::int32_t>>(),
                     settings_from(j.at("settings"))});
  }
  return wires;
}

std::optional<std::vector<FeedArrival>> ServeFeed::next(std::int64_t room, bool idle) {
  std::optional<std::vector<Wire>> wires = exchange(room, idle);
  if (!wires) return std::nullopt;
  std::vector<FeedArrival> arrivals;
  for (Wire& wire : *wires) {
    FeedArrival arrival{wire.id, build_(wire.prompt, wire.settings)};
    if (comm_.is_root()) {
      RequestHandle handle = handles_.at(wire.id);
      arrival.request.options.interrupt = [handle] {
        return handle->cancelled() ? kCancelledSignal : 0;
      };
    }
    settings_[wire.id] = wire.settings;
    arrivals.push_back(std::move(arrival));
  }
  handles_.clear();
  return arrivals;
}

const RequestSettings& ServeFeed::settings(std::int64_t id) const {
  const auto found = settings_.find(id);
  SELFSPEC_CHECK(found != settings_.end(), "request {} is not running", id);
  return found->second;
}

}  // namespace selfspec::serve
