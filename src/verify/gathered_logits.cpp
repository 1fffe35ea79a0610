// Gather-based access to vocab-sharded logits: every row is assembled on rank 0 (MPI gather of
// each rank's contiguous vocab range) and everything else is a local computation there, over the
// same shard ranges the local-reduction variant uses (logit_statistics.hpp), or over whole rows
// (Statistics::kWholeRows, for results that do not depend on the TP degree). The rows reach rank 0
// through ShardReductions::gather_rows: from device memory by one NCCL all-gather on the compute
// stream when they live on a GPU, else by the communicator's host gather.
#include "verify/gathered_logits.hpp"

#include "core/error.hpp"

#include <chrono>
#include <numeric>

namespace selfspec {

GatheredLogits::GatheredLogits(Communicator& comm, const ShardPlan& shard, Statistics statistics,
                               std::unique_ptr<ShardReductions> rows)
    : comm_(comm),
      reductions_(rows != nullptr ? std::move(rows)
                                  : make_host_shard_reductions(shard.vocab_shard())),
      counts_(shard.vocab_counts) {
  offsets_.resize(counts_.size());
  std::exclusive_scan(counts_.begin(), counts_.end(), offsets_.begin(), std::int64_t{0});
  vocab_ = std::accumulate(counts_.begin(), counts_.end(), std::int64_t{0});
  stat_counts_ = statistics == Statistics::kWholeRows ? std::vector<std::int64_t>{vocab_} : counts_;
  stat_offsets_ = statistics == Statistics::kWholeRows ? std::vector<std::int64_t>{0} : offsets_;
}

void GatheredLogits::set_rows(const LogitRows& given) {
  const auto start = std::chrono::steady_clock::now();
  reductions_->set_rows(given);  // checks the rows' memory and width
  rows_ = given.rows;
  full_.resize(static_cast<std::size_t>(vocab_ * rows_));
  if (comm_.size() == 1) {
    const std::span<const float> rows = reductions_->host_rows();
    std::copy(rows.begin(), rows.end(), full_.begin());
    return;
  }
  rank_major_ = reductions_->gather_rows(comm_);
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!comm_.is_root()) return;
  // The gather is rank-major ([rank][row][local vocab]); reorder to [row][vocab].
  std::int64_t source = 0;
  for (std::size_t r = 0; r < counts_.size(); ++r) {
    for (std::int64_t row = 0; row < rows_; ++row) {
      std::copy_n(rank_major_.begin() + source + row * counts_[r], counts_[r],
                  full_.begin() + row * vocab_ + offsets_[r]);
    }
    source += counts_[r] * rows_;
  }
}

std::span<const float> GatheredLogits::row(std::int64_t r) const {
  return std::span<const float>(full_).subspan(static_cast<std::size_t>(r * vocab_),
                                               static_cast<std::size_t>(vocab_));
}

std::span<const float> GatheredLogits::shard_of(std::span<const float> full_row,
                                                std::size_t s) const {
  return full_row.subspan(static_cast<std::size_t>(stat_offsets_[s]),
                          static_cast<std::size_t>(stat_counts_[s]));
}

int GatheredLogits::retain(std::int64_t r) {
  if (comm_.is_root()) {
    const auto values = row(r);
    retained_.emplace_back(values.begin(), values.end());
  } else {
    retained_.emplace_back();
  }
  return static_cast<int>(retained_.size()) - 1;
}

std::vector<RowStats> GatheredLogits::compute_row_stats(double inv_temperature, RowNeeds needs) {
  std::vector<RowStats> stats;
  if (!comm_.is_root()) return stats;
  std::vector<ShardStats> shards(stat_counts_.size());
  for (std::int64_t r = 0; r < rows_; ++r) {
    for (std::size_t s = 0; s < stat_counts_.size(); ++s) {
      shards[s] = shard_stats(shard_of(row(r), s), stat_offsets_[s], inv_temperature, needs);
    }
    stats.push_back(combine_shards(shards));
  }
  return stats;
}

std::vector<float> GatheredLogits::logits_of(std::span<const std::int32_t> ids) {
  std::vector<float> values;
  if (!comm_.is_root()) return values;
  for (std::size_t r = 0; r < ids.size(); ++r) {
    values.push_back(row(static_cast<std::int64_t>(r))[static_cast<std::size_t>(ids[r])]);
  }
  return values;
}

DrawnToken GatheredLogits::sample_dense(std::int64_t r, const RowStats& stats,
                                        double inv_temperature, double target) {
  if (!comm_.is_root()) return {};
  const ShardPick pick = pick_shard(stats.shard_mass, target);
  const auto s = static_cast<std::size_t>(pick.shard);
  const double local_target = pick.remainder * std::exp(stats.max - stats.shard_max[s]);
  const std::int32_t id = walk_softmax(shard_of(row(r), s), stat_offsets_[s], inv_temperature,
                                       stats.shard_max[s], local_target);
  return {id, row(r)[static_cast<std::size_t>(id)]};
}

std::optional<std::int32_t> GatheredLogits::sample_residual(std::int64_t r, int slot,
                                                            const DensePair& pair, double u) {
  if (!comm_.is_root()) return std::nullopt;
  const std::span<const float> q_row(retained_[static_cast<std::size_t>(slot)]);
  std::vector<double> masses(stat_counts_.size());
  double total = 0.0;
  for (std::size_t s = 0; s < stat_counts_.size(); ++s) {
    masses[s] = residual_mass(shard_of(row(r), s), shard_of(q_row, s), pair);
    total += masses[s];
  }
  if (!(total > 0.0)) return std::nullopt;
  const ShardPick pick = pick_shard(masses, u * total);
  const auto s = static_cast<std::size_t>(pick.shard);
  return walk_residual(shard_of(row(r), s), shard_of(q_row, s), stat_offsets_[s], pair,
                       pick.remainder);
}

std::vector<TokenDistribution> GatheredLogits::warp(const SamplingParams& params) {
  std::vector<TokenDistribution> dists;
  if (!comm_.is_root()) return dists;
  for (std::int64_t r = 0; r < rows_; ++r) dists.push_back(warp_logits(row(r), params));
  return dists;
}

}  // namespace selfspec
