// ShardedLogits that reduces each vocab shard on its own rank; only scalars cross ranks
// (see sharded_logits.hpp). The per-shard reductions run where the rows live (ShardReductions:
// host memory, or device memory for device-side verification); this class holds the protocol —
// who sends what to whom — which is the same for both.
#pragma once

#include "backend/shard_reductions.hpp"
#include "verify/gathered_logits.hpp"
#include "verify/sharded_logits.hpp"

#include <memory>

namespace selfspec {

class LocalReductionLogits final : public ShardedLogits {
 public:
  // reductions: nullptr for host rows (make_host_shard_reductions).
  LocalReductionLogits(Communicator& comm, const ShardPlan& shard,
                       std::unique_ptr<ShardReductions> reductions = nullptr);
  std::string_view name() const override { return "local"; }
  bool shares_nothing() const override { return false; }
  using ShardedLogits::set_rows;
  void set_rows(const LogitRows& rows) override;
  int retain(std::int64_t row) override { return reductions_->retain(row); }
  void clear_retained() override { reductions_->clear_retained(); }
  std::vector<float> logits_of(std::span<const std::int32_t> ids) override;
  DrawnToken sample_dense(std::int64_t row, const RowStats& stats, double inv_temperature,
                          double target) override;
  std::optional<std::int32_t> sample_residual(std::int64_t row, int slot, const DensePair& pair,
                                              double u) override;
  std::vector<TokenDistribution> warp(const SamplingParams& params) override;

  // Where the per-shard reductions run ("host", "cuda").
  std::string_view reductions_name() const { return reductions_->name(); }

 protected:
  std::vector<RowStats> compute_row_stats(double inv_temperature, RowNeeds needs) override;

 private:
  int owner_of(std::int32_t id) const;
  template <typename T>
  void timed_broadcast(T& value, int root);
  template <typename Body>
  void timed(Body&& body);

  Communicator& comm_;
  ShardPlan shard_;
  std::vector<std::int64_t> offsets_;
  std::unique_ptr<ShardReductions> reductions_;
  GatheredLogits fallback_;  // whole rows, for top-p without top-k (a global sort)
};

}  // namespace selfspec
