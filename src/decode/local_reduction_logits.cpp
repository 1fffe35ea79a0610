// Local-reduction access to vocab-sharded logits (--logits local; docs/ARCHITECTURE.md, "The
// rank-0 protocol"): each rank reduces its own vocabulary range and sends O(rows) scalars — shard
// max, first argmax, Σexp, the logit of a queried token — instead of O(V·rows) logits. Sampling
// runs in two passes: rank 0 picks the shard from the gathered shard masses and broadcasts the
// pick, the owning rank walks inside its shard and broadcasts the token. Speculative sampling's
// residual norm(max(0, p − q)) works the same way after each rank has summed its shard's residual
// mass (every rank keeps its shard of the draft rows). Top-k warping gathers each shard's own top-k
// candidates (k + ties per row); top-p without top-k needs a global sort and gathers whole rows.
// All arithmetic is logit_statistics.hpp's, so decisions equal GatheredLogits' bit for bit.
#include "decode/local_reduction_logits.hpp"

#include "core/error.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

namespace selfspec {
namespace {

// Rank 0's pick of a shard and the target mass inside it (shard-local units).
struct WalkOrder {
  std::int32_t shard = -1;  // -1: nothing to draw (empty residual)
  std::int32_t padding = 0;
  double target = 0.0;
};

}  // namespace

LocalReductionLogits::LocalReductionLogits(Communicator& comm, const ShardPlan& shard)
    : comm_(comm), shard_(shard), fallback_(comm, shard) {
  offsets_.resize(shard_.vocab_counts.size());
  std::exclusive_scan(shard_.vocab_counts.begin(), shard_.vocab_counts.end(), offsets_.begin(),
                      std::int64_t{0});
  local_vocab_ = shard_.vocab.size();
}

template <typename T>
void LocalReductionLogits::timed_broadcast(T& value, int root) {
  const auto start = std::chrono::steady_clock::now();
  comm_.broadcast_object(value, root);
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void LocalReductionLogits::set_rows(std::span<const float> local_rows, std::int64_t rows) {
  SELFSPEC_CHECK(static_cast<std::int64_t>(local_rows.size()) == rows * local_vocab_,
                 "logit rows: {} values for {} rows of {}", local_rows.size(), rows, local_vocab_);
  rows_ = local_rows;
  n_rows_ = rows;
}

std::span<const float> LocalReductionLogits::local_row(std::int64_t r) const {
  return rows_.subspan(static_cast<std::size_t>(r * local_vocab_),
                       static_cast<std::size_t>(local_vocab_));
}

int LocalReductionLogits::owner_of(std::int32_t id) const {
  for (std::size_t r = 0; r < offsets_.size(); ++r) {
    if (id >= offsets_[r] && id < offsets_[r] + shard_.vocab_counts[r]) return static_cast<int>(r);
  }
  fail("token id {} is outside the vocabulary", id);
}

int LocalReductionLogits::retain(std::int64_t r) {
  const auto values = local_row(r);
  retained_.emplace_back(values.begin(), values.end());
  return static_cast<int>(retained_.size()) - 1;
}

std::vector<RowStats> LocalReductionLogits::row_stats(double inv_temperature) {
  const auto ranks = static_cast<std::size_t>(comm_.size());
  std::vector<ShardStats> mine(static_cast<std::size_t>(n_rows_));
  for (std::int64_t r = 0; r < n_rows_; ++r) {
    mine[static_cast<std::size_t>(r)] =
        shard_stats(local_row(r), shard_.vocab.begin, inv_temperature);
  }
  std::vector<ShardStats> all(comm_.is_root() ? mine.size() * ranks : 0);
  const auto start = std::chrono::steady_clock::now();
  comm_.gather_records<ShardStats>(mine, all, 0);
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<RowStats> stats;
  if (!comm_.is_root()) return stats;
  std::vector<ShardStats> shards(ranks);
  for (std::size_t r = 0; r < mine.size(); ++r) {
    for (std::size_t s = 0; s < ranks; ++s) shards[s] = all[s * mine.size() + r];
    stats.push_back(combine_shards(shards));
  }
  return stats;
}

std::vector<float> LocalReductionLogits::logits_of(std::span<const std::int32_t> ids) {
  const auto ranks = static_cast<std::size_t>(comm_.size());
  std::vector<float> mine(ids.size(), std::numeric_limits<float>::quiet_NaN());
  for (std::size_t r = 0; r < ids.size(); ++r) {
    if (shard_.vocab.contains(ids[r])) {
      mine[r] = local_row(
          static_cast<std::int64_t>(r))[static_cast<std::size_t>(ids[r] - shard_.vocab.begin)];
    }
  }
  std::vector<float> all(comm_.is_root() ? ids.size() * ranks : 0);
  const auto start = std::chrono::steady_clock::now();
  comm_.gather_records<float>(mine, all, 0);
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<float> values;
  if (!comm_.is_root()) return values;
  for (std::size_t r = 0; r < ids.size(); ++r) {
    values.push_back(all[static_cast<std::size_t>(owner_of(ids[r])) * ids.size() + r]);
  }
  return values;
}

DrawnToken LocalReductionLogits::sample_dense(std::int64_t r, const RowStats& stats,
                                              double inv_temperature, double target) {
  WalkOrder order;
  if (comm_.is_root()) {
    const ShardPick pick = pick_shard(stats.shard_mass, target);
    const auto s = static_cast<std::size_t>(pick.shard);
    order.shard = pick.shard;
    order.target = pick.remainder * std::exp(stats.max - stats.shard_max[s]);
  }
  timed_broadcast(order, 0);
  DrawnToken drawn;
  if (comm_.rank() == order.shard) {
    const ShardStats mine = shard_stats(local_row(r), shard_.vocab.begin, inv_temperature);
    drawn.id =
        walk_softmax(local_row(r), shard_.vocab.begin, inv_temperature, mine.max, order.target);
    drawn.logit = local_row(r)[static_cast<std::size_t>(drawn.id - shard_.vocab.begin)];
  }
  timed_broadcast(drawn, order.shard);
  return drawn;
}

std::optional<std::int32_t> LocalReductionLogits::sample_residual(std::int64_t r, int slot,
                                                                  const DensePair& pair_root,
                                                                  double u) {
  DensePair pair = pair_root;
  timed_broadcast(pair, 0);
  const std::span<const float> q_row(retained_[static_cast<std::size_t>(slot)]);
  const double mine = residual_mass(local_row(r), q_row, pair);
  std::vector<double> masses(comm_.is_root() ? static_cast<std::size_t>(comm_.size()) : 0);
  const auto start = std::chrono::steady_clock::now();
  comm_.gather_records<double>(std::span(&mine, 1), masses, 0);
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WalkOrder order;
  if (comm_.is_root()) {
    const double total = std::accumulate(masses.begin(), masses.end(), 0.0);
    if (total > 0.0) {
      const ShardPick pick = pick_shard(masses, u * total);
      order.shard = pick.shard;
      order.target = pick.remainder;
    }
  }
  timed_broadcast(order, 0);
  if (order.shard < 0) return std::nullopt;
  std::int32_t id = -1;
  if (comm_.rank() == order.shard) {
    id = walk_residual(local_row(r), q_row, shard_.vocab.begin, pair, order.target);
  }
  timed_broadcast(id, order.shard);
  return id;
}

std::vector<TokenDistribution> LocalReductionLogits::warp(const SamplingParams& params) {
  if (params.top_k <= 0) {
    // Top-p alone needs the global order of the whole vocabulary.
    const double before = fallback_.comm_seconds();
    fallback_.set_rows(rows_, n_rows_);
    comm_seconds_ += fallback_.comm_seconds() - before;
    return fallback_.warp(params);
  }
  // Each shard's own top-k (+ ties) per row: [count row 0, ..., count row R-1, (logit, id)...].
  std::vector<float> packed(static_cast<std::size_t>(n_rows_));
  for (std::int64_t r = 0; r < n_rows_; ++r) {
    const std::vector<std::int32_t> ids =
        top_k_candidates(local_row(r), shard_.vocab.begin, params.top_k);
    packed[static_cast<std::size_t>(r)] = static_cast<float>(ids.size());
    for (std::int32_t id : ids) {
      packed.push_back(local_row(r)[static_cast<std::size_t>(id - shard_.vocab.begin)]);
      packed.push_back(static_cast<float>(id));  // exact: vocabularies are far below 2^24
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(comm_.size()));
  comm_.all_gather_u64(packed.size(), sizes);
  std::vector<std::int64_t> counts(sizes.begin(), sizes.end());
  std::vector<float> all(
      comm_.is_root() ? std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}) : 0);
  comm_.gather(packed, all, counts, 0);
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<TokenDistribution> dists;
  if (!comm_.is_root()) return dists;
  std::vector<std::vector<std::int32_t>> ids(static_cast<std::size_t>(n_rows_));
  std::vector<std::vector<float>> logits(static_cast<std::size_t>(n_rows_));
  std::size_t base = 0;
  for (std::size_t rank = 0; rank < sizes.size(); ++rank) {
    std::size_t cursor = base + static_cast<std::size_t>(n_rows_);
    for (std::size_t r = 0; r < static_cast<std::size_t>(n_rows_); ++r) {
      const auto n = static_cast<std::size_t>(all[base + r]);
      for (std::size_t i = 0; i < n; ++i, cursor += 2) {
        logits[r].push_back(all[cursor]);
        ids[r].push_back(static_cast<std::int32_t>(all[cursor + 1]));
      }
    }
    base += static_cast<std::size_t>(sizes[rank]);
  }
  for (std::size_t r = 0; r < ids.size(); ++r) {
    dists.push_back(warp_candidates(std::move(ids[r]), logits[r], params));
  }
  return dists;
}

std::unique_ptr<ShardedLogits> make_sharded_logits(LogitsMode mode, Communicator& comm,
                                                   const ShardPlan& shard, bool tp_invariant) {
  if (tp_invariant) {
    return std::make_unique<GatheredLogits>(comm, shard, GatheredLogits::Statistics::kWholeRows);
  }
  if (mode == LogitsMode::kLocal) return std::make_unique<LocalReductionLogits>(comm, shard);
  return std::make_unique<GatheredLogits>(comm, shard);
}

std::string_view logits_mode_name(LogitsMode mode) {
  return mode == LogitsMode::kLocal ? "local" : "gather";
}

}  // namespace selfspec
