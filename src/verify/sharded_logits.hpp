// How rank 0 learns what it needs from vocab-sharded logits (the tensor-parallel LM head gives
// each rank the logits of its contiguous vocabulary range). Two implementations, one per file:
//   GatheredLogits        — gathers whole rows on rank 0 (O(V·rows) floats cross ranks);
//   LocalReductionLogits  — every rank reduces its own shard and only scalars cross ranks
//                           (per row: max, argmax, Σexp and the logit of one token; sampling
//                           walks run in two passes: rank 0 picks the shard from the gathered
//                           masses, the owning rank walks inside it).
// Both evaluate the same canonical arithmetic (logit_statistics.hpp) over the same shards, so the
// verifier on top makes identical decisions with either. Every method is collective: all ranks
// call it in the same order with the same arguments (arguments marked "root" matter on rank 0
// only; results are meaningful on rank 0 unless stated otherwise).
#pragma once

#include "backend/logit_statistics.hpp"
#include "backend/shard_reductions.hpp"
#include "comm/communicator.hpp"
#include "model/shard_plan.hpp"
#include "verify/sampler.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace selfspec {

enum class LogitsMode { kGather, kLocal };
std::string_view logits_mode_name(LogitsMode mode);

class ShardedLogits {
 public:
  virtual ~ShardedLogits() = default;
  virtual std::string_view name() const = 0;

  // The rows of the latest forward pass, [rows × vocab_local] on every rank (borrowed until the
  // next set_rows). Rows in device memory are taken by implementations built over device-resident
  // ShardReductions (device-side verification); the others want host rows.
  virtual void set_rows(const LogitRows& rows) = 0;
  void set_rows(std::span<const float> local_rows, std::int64_t rows);
  // Keeps current row `row` for later use as a draft distribution q; returns its slot.
  virtual int retain(std::int64_t row) = 0;
  virtual void clear_retained() = 0;

  // Root: the softmax statistics of every current row at 1/T.
  std::vector<RowStats> row_stats(double inv_temperature) {
    return compute_row_stats(inv_temperature, RowNeeds::kSoftmax);
  }
  // Root: every current row's argmax (temperature 1, first maximum: row_stats' argmax), without
  // the softmax's exponentials — what greedy decisions need.
  std::vector<std::int32_t> row_argmax();
  // Root: the logit of ids[r] in current row r, for r < ids.size() (ids known on every rank).
  virtual std::vector<float> logits_of(std::span<const std::int32_t> ids) = 0;
  // A draw from current row `row`'s dense softmax at 1/T: the id whose cumulative probability
  // mass first exceeds `target` = u·Z (root; `stats` is root's row_stats entry).
  virtual DrawnToken sample_dense(std::int64_t row, const RowStats& stats, double inv_temperature,
                                  double target) = 0;
  // A draw from norm(max(0, p − q)), p = current row `row`, q = retained slot `slot`, densities
  // from `pair` (root), at cumulative fraction `u` (root) of the residual mass. nullopt when the
  // residual has no mass (p == q up to rounding).
  virtual std::optional<std::int32_t> sample_residual(std::int64_t row, int slot,
                                                      const DensePair& pair, double u) = 0;
  // Root: the warped (temperature, top-k, top-p) distribution of every current row.
  virtual std::vector<TokenDistribution> warp(const SamplingParams& params) = 0;

  // True when every method after set_rows() is a local computation on rank 0 (no collective):
  // the caller may then branch on rank 0's results without telling the other ranks.
  virtual bool shares_nothing() const = 0;

  // Seconds spent inside collectives.
  double comm_seconds() const { return comm_seconds_; }

 protected:
  // Root: every current row's statistics at 1/T, the softmax's or (RowNeeds::kArgmax) only the
  // max and argmax.
  virtual std::vector<RowStats> compute_row_stats(double inv_temperature, RowNeeds needs) = 0;

  double comm_seconds_ = 0.0;
};

// tp_invariant: whole rows on rank 0 whatever the mode, with statistics over whole rows
// (GatheredLogits::Statistics::kWholeRows), so that every decision is the same at every TP
// degree (the model's tp-invariant reduction, model/reduction_order.hpp).
// reductions: where the rows live (nullptr: host rows). Device-resident reductions make the local
// mode decide from rows left in device memory, and the gathering modes fetch whole rows from
// there through the device exchange.
std::unique_ptr<ShardedLogits> make_sharded_logits(
    LogitsMode mode, Communicator& comm, const ShardPlan& shard, bool tp_invariant = false,
    std::unique_ptr<ShardReductions> reductions = nullptr);

}  // namespace selfspec
