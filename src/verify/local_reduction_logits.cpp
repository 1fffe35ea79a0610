// Local-reduction access to vocab-sharded logits (--logits local; docs/ARCHITECTURE.md, "The
// rank-0 protocol"): each rank reduces its own vocabulary range and sends O(rows) scalars — shard
// max, first argmax, Σexp, the logit of a queried token — instead of O(V·rows) logits. Sampling
// runs in two passes: rank 0 picks the shard from the gathered shard masses and broadcasts the
// pick, the owning rank walks inside its shard and broadcasts the token. Speculative sampling's
// residual norm(max(0, p − q)) works the same way after each rank has summed its shard's residual
// mass (every rank keeps its shard of the draft rows). Top-k warping gathers each shard's own top-k
// candidates (k + ties per row); top-p without top-k needs a global sort and gathers whole rows.
// All arithmetic is logit_statistics.hpp's, so decisions equal GatheredLogits' bit for bit. The
// per-shard halves run in ShardReductions, where the rows live: on the CUDA backend the rows stay
// in device memory and only the scalars below (and drawn ids) reach the host (device-side
// verification; there the reductions agree with the host's to rounding, see
// kernels/cuda/shard_walk.cu).
#include "verify/local_reduction_logits.hpp"

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

LocalReductionLogits::LocalReductionLogits(Communicator& comm, const ShardPlan& shard,
                                           std::unique_ptr<ShardReductions> reductions)
    : comm_(comm),
      shard_(shard),
      reductions_(reductions != nullptr ? std::move(reductions)
                                        : make_host_shard_reductions(shard.vocab_shard())),
      fallback_(comm, shard) {
  offsets_.resize(shard_.vocab_counts.size());
  std::exclusive_scan(shard_.vocab_counts.begin(), shard_.vocab_counts.end(), offsets_.begin(),
                      std::int64_t{0});
}

template <typename Body>
void LocalReductionLogits::timed(Body&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <typename T>
void LocalReductionLogits::timed_broadcast(T& value, int root) {
  timed([&] { comm_.broadcast_object(value, root); });
}

void LocalReductionLogits::set_rows(const LogitRows& rows) {
  reductions_->set_rows(rows);
}

int LocalReductionLogits::owner_of(std::int32_t id) const {
  for (std::size_t r = 0; r < offsets_.size(); ++r) {
    if (id >= offsets_[r] && id < offsets_[r] + shard_.vocab_counts[r]) return static_cast<int>(r);
  }
  fail("token id {} is outside the vocabulary", id);
}

std::vector<RowStats> LocalReductionLogits::compute_row_stats(double inv_temperature,
                                                              RowNeeds needs) {
  const auto ranks = static_cast<std::size_t>(comm_.size());
  const auto rows = static_cast<std::size_t>(reductions_->rows());
  std::vector<ShardStats> all;  // rank-major, root
  timed([&] { all = reductions_->gather_stats(comm_, inv_temperature, needs); });
  std::vector<RowStats> stats;
  if (!comm_.is_root()) return stats;
  std::vector<ShardStats> shards(ranks);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t s = 0; s < ranks; ++s) shards[s] = all[s * rows + r];
    stats.push_back(combine_shards(shards));
  }
  return stats;
}

std::vector<float> LocalReductionLogits::logits_of(std::span<const std::int32_t> ids) {
  const auto ranks = static_cast<std::size_t>(comm_.size());
  const std::vector<float> mine = reductions_->logits_at(ids);
  std::vector<float> all(comm_.is_root() ? ids.size() * ranks : 0);
  timed([&] { comm_.gather_records<float>(mine, all, 0); });
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
    drawn = reductions_->walk_softmax(r, inv_temperature, order.target);
    SELFSPEC_CHECK(drawn.id >= 0, "sampling walk over vocab shard {} without mass", order.shard);
  }
  timed_broadcast(drawn, order.shard);
  return drawn;
}

std::optional<std::int32_t> LocalReductionLogits::sample_residual(std::int64_t r, int slot,
                                                                  const DensePair& pair_root,
                                                                  double u) {
  DensePair pair = pair_root;
  timed_broadcast(pair, 0);
  const double mine = reductions_->residual_mass(r, slot, pair);
  std::vector<double> masses(comm_.is_root() ? static_cast<std::size_t>(comm_.size()) : 0);
  timed([&] { comm_.gather_records<double>(std::span(&mine, 1), masses, 0); });
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
    id = reductions_->walk_residual(r, slot, pair, order.target);
    SELFSPEC_CHECK(id >= 0, "residual walk over vocab shard {} without mass", order.shard);
  }
  timed_broadcast(id, order.shard);
  return id;
}

std::vector<TokenDistribution> LocalReductionLogits::warp(const SamplingParams& params) {
  if (params.top_k <= 0) {
    // Top-p alone needs the global order of the whole vocabulary.
    const double before = fallback_.comm_seconds();
    const std::span<const float> host = reductions_->host_rows();
    fallback_.set_rows(
        LogitRows{host.data(), reductions_->rows(), reductions_->vocab_local(), false});
    comm_seconds_ += fallback_.comm_seconds() - before;
    return fallback_.warp(params);
  }
  // Each shard's own top-k (+ ties) per row: [count row 0, ..., count row R-1, (logit, id)...],
  // from host rows (no device half yet: device rows are copied to the host here).
  const std::int64_t n_rows = reductions_->rows();
  const std::span<const float> host = reductions_->host_rows();
  const std::int64_t width = reductions_->vocab_local();
  const auto local_row = [&](std::int64_t r) {
    return host.subspan(static_cast<std::size_t>(r * width), static_cast<std::size_t>(width));
  };
  std::vector<float> packed(static_cast<std::size_t>(n_rows));
  for (std::int64_t r = 0; r < n_rows; ++r) {
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
  std::vector<std::vector<std::int32_t>> ids(static_cast<std::size_t>(n_rows));
  std::vector<std::vector<float>> logits(static_cast<std::size_t>(n_rows));
  std::size_t base = 0;
  for (std::size_t rank = 0; rank < sizes.size(); ++rank) {
    std::size_t cursor = base + static_cast<std::size_t>(n_rows);
    for (std::size_t r = 0; r < static_cast<std::size_t>(n_rows); ++r) {
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

}  // namespace selfspec
