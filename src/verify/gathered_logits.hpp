// ShardedLogits that gathers whole rows on rank 0 (see sharded_logits.hpp).
#pragma once

#include "verify/sharded_logits.hpp"

#include <memory>

namespace selfspec {

class GatheredLogits final : public ShardedLogits {
 public:
  // Over which ranges the row statistics, sampling walks and residual masses are computed:
  // kRankShards, the ranks' vocab shards (the same arithmetic as LocalReductionLogits, so both
  // modes decide alike), or kWholeRows, one range per row (the same arithmetic at every TP
  // degree: the tp-invariant reduction's choice, model/reduction_order.hpp).
  enum class Statistics { kRankShards, kWholeRows };
  // rows: where this rank's rows live and how they travel (nullptr: host rows).
  GatheredLogits(Communicator& comm, const ShardPlan& shard,
                 Statistics statistics = Statistics::kRankShards,
                 std::unique_ptr<ShardReductions> rows = nullptr);
  std::string_view name() const override { return "gather"; }
  bool shares_nothing() const override { return true; }
  using ShardedLogits::set_rows;
  void set_rows(const LogitRows& rows) override;
  int retain(std::int64_t row) override;
  void clear_retained() override { retained_.clear(); }
  std::vector<float> logits_of(std::span<const std::int32_t> ids) override;
  DrawnToken sample_dense(std::int64_t row, const RowStats& stats, double inv_temperature,
                          double target) override;
  std::optional<std::int32_t> sample_residual(std::int64_t row, int slot, const DensePair& pair,
                                              double u) override;
  std::vector<TokenDistribution> warp(const SamplingParams& params) override;

  // Root: the gathered row r ([vocab]).
  std::span<const float> row(std::int64_t r) const;

 protected:
  std::vector<RowStats> compute_row_stats(double inv_temperature, RowNeeds needs) override;

 private:
  std::span<const float> shard_of(std::span<const float> full_row, std::size_t s) const;

  Communicator& comm_;
  std::unique_ptr<ShardReductions> reductions_;
  std::vector<std::int64_t> counts_;  // the ranks' vocab shards (the gather)
  std::vector<std::int64_t> offsets_;
  std::vector<std::int64_t> stat_counts_;  // the statistics' ranges (Statistics)
  std::vector<std::int64_t> stat_offsets_;
  std::int64_t vocab_ = 0;
  std::int64_t rows_ = 0;
  std::vector<float> rank_major_;
  std::vector<float> full_;                   // root: [rows × vocab]
  std::vector<std::vector<float>> retained_;  // root: full rows kept as draft distributions
};

}  // namespace selfspec
