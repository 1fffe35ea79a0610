// ShardedLogits that reduces each vocab shard on its own rank; only scalars cross ranks
// (see sharded_logits.hpp).
#pragma once

#include "decode/gathered_logits.hpp"
#include "decode/sharded_logits.hpp"

namespace selfspec {

class LocalReductionLogits final : public ShardedLogits {
 public:
  LocalReductionLogits(Communicator& comm, const ShardPlan& shard);
  std::string_view name() const override { return "local"; }
  bool shares_nothing() const override { return false; }
  void set_rows(std::span<const float> local_rows, std::int64_t rows) override;
  int retain(std::int64_t row) override;
  void clear_retained() override { retained_.clear(); }
  std::vector<RowStats> row_stats(double inv_temperature) override;
  std::vector<float> logits_of(std::span<const std::int32_t> ids) override;
  DrawnToken sample_dense(std::int64_t row, const RowStats& stats, double inv_temperature,
                          double target) override;
  std::optional<std::int32_t> sample_residual(std::int64_t row, int slot, const DensePair& pair,
                                              double u) override;
  std::vector<TokenDistribution> warp(const SamplingParams& params) override;

 private:
  std::span<const float> local_row(std::int64_t r) const;
  int owner_of(std::int32_t id) const;
  template <typename T>
  void timed_broadcast(T& value, int root);

  Communicator& comm_;
  ShardPlan shard_;
  std::vector<std::int64_t> offsets_;
  std::int64_t local_vocab_ = 0;
  std::span<const float> rows_;
  std::int64_t n_rows_ = 0;
  std::vector<std::vector<float>> retained_;  // this rank's shard of each kept draft row
  GatheredLogits fallback_;                   // whole rows, for top-p without top-k (a global sort)
};

}  // namespace selfspec
