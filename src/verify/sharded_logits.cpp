#include "verify/sharded_logits.hpp"

#include "core/error.hpp"
#include "verify/gathered_logits.hpp"
#include "verify/local_reduction_logits.hpp"

namespace selfspec {

std::vector<std::int32_t> ShardedLogits::row_argmax() {
  std::vector<std::int32_t> ids;
  for (const RowStats& stats : compute_row_stats(1.0, RowNeeds::kArgmax)) {
    ids.push_back(stats.argmax);
  }
  return ids;
}

void ShardedLogits::set_rows(std::span<const float> local_rows, std::int64_t rows) {
  SELFSPEC_CHECK(
      rows >= 0 && (rows == 0 ? local_rows.empty()
                              : static_cast<std::int64_t>(local_rows.size()) % rows == 0),
      "logit rows: {} values for {} rows", local_rows.size(), rows);
  const std::int64_t width = rows == 0 ? 0 : static_cast<std::int64_t>(local_rows.size()) / rows;
  set_rows(LogitRows{local_rows.data(), rows, width, false});
}

std::unique_ptr<ShardedLogits> make_sharded_logits(LogitsMode mode, Communicator& comm,
                                                   const ShardPlan& shard, bool tp_invariant,
                                                   std::unique_ptr<ShardReductions> reductions) {
  if (tp_invariant) {
    return std::make_unique<GatheredLogits>(comm, shard, GatheredLogits::Statistics::kWholeRows,
                                            std::move(reductions));
  }
  if (mode == LogitsMode::kLocal) {
    return std::make_unique<LocalReductionLogits>(comm, shard, std::move(reductions));
  }
  return std::make_unique<GatheredLogits>(comm, shard, GatheredLogits::Statistics::kRankShards,
                                          std::move(reductions));
}

std::string_view logits_mode_name(LogitsMode mode) {
  return mode == LogitsMode::kLocal ? "local" : "gather";
}

}  // namespace selfspec
