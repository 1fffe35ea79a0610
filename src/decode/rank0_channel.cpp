#include "decode/rank0_channel.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <chrono>

namespace selfspec {
namespace {

std::uint64_t mix(std::uint64_t hash, std::uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  return hash;
}

}  // namespace

Rank0Channel::Rank0Channel(Communicator& comm, const GenerationOptions& options,
                           const TokenCallback& on_token)
    : comm_(comm), options_(options), on_token_(on_token) {}

std::int64_t Rank0Channel::remaining() const {
  return options_.max_new_tokens - static_cast<std::int64_t>(tokens_.size());
}

bool Rank0Channel::emit(std::span<const std::int32_t> tokens) {
  SELFSPEC_CHECK(static_cast<int>(tokens.size()) <= ControlMessage::kMaxTokens,
                 "{} tokens do not fit one control message (at most {})", tokens.size(),
                 ControlMessage::kMaxTokens);
  const std::vector<std::int32_t>& eos = options_.eos_ids;
  message_.n_tokens = 0;
  for (std::int32_t token : tokens) {
    message_.tokens[message_.n_tokens++] = token;
    tokens_.push_back(token);
    if (on_token_) on_token_(token);
    if (!options_.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) {
      stopped_on_eos_ = true;
      return true;
    }
    if (remaining() <= 0) return true;
  }
  return false;
}

bool Rank0Channel::end_step(bool ended) {
  const int signal = !ended && options_.interrupt ? options_.interrupt() : 0;
  message_.flags =
      (stopped_on_eos_ ? kFlagEos : 0u) | (signal != 0 ? interrupted_flags(signal) : 0u);
  return ended || signal != 0;
}

void Rank0Channel::broadcast(const KvCache& kv) {
  const auto start = std::chrono::steady_clock::now();
  message_.step = step_;
  comm_.broadcast_object(message_, 0);
  if (options_.debug_sync) check_sync(kv);
  ++step_;
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Rank0Channel::broadcast_tokens(const KvCache& kv) {
  broadcast(kv);
  if (is_root()) return;
  tokens_.insert(tokens_.end(), message_.tokens.begin(),
                 message_.tokens.begin() + static_cast<std::ptrdiff_t>(message_.n_tokens));
}

void Rank0Channel::check_sync(const KvCache& kv) {
  std::uint64_t local = mix(message_.checksum(), step_);
  local = mix(local, static_cast<std::uint64_t>(kv.length()));
  local = mix(local, message_.step);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_.size()));
  comm_.all_gather_u64(local, all);
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      fail(
          "--debug-sync: ranks diverged at control step {}: rank {} has state checksum {:016x}, "
          "rank 0 has {:016x} (message, step counter and KV length must agree on every rank)",
          step_, r, all[r], all[0]);
    }
  }
}

}  // namespace selfspec
