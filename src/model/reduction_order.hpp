// How a row-parallel projection (o_proj, down_proj) adds up the ranks' partial products.
//
//   kRankOrder   (default) each rank multiplies its whole column slice, and the all-reduce adds
//                the ranks' partial sums in rank order. Fast, bit-identical on every rank, but
//                the result depends on the TP degree: float addition is not associative, so
//                TP 1 and TP 2 round differently (by an ulp here and there).
//   kTpInvariant the reduction dimension is cut into a fixed partition of P chunks that does not
//                depend on the TP degree (P = the number of query heads, which every valid TP
//                degree divides); each chunk's partial product is computed on its own, the
//                chunks' partials are gathered, and they are added in chunk order 0..P-1. Every
//                TP degree then computes the same floats in the same order, so the forward is
//                bit-identical at TP 1, 2, 4, ... (model/fixed_partition_projection.hpp). It
//                moves P/tp times more bytes per collective and runs on host-memory backends.
// collect-exit-data uses kTpInvariant by default (issue 11: the collected data must be identical
// bit for bit at every TP degree).
#pragma once

#include "model_io/model_config.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace selfspec {

enum class ReductionOrder { kRankOrder, kTpInvariant };

// "rank-order" | "tp-invariant".
std::string_view reduction_order_name(ReductionOrder order);
std::optional<ReductionOrder> parse_reduction_order(std::string_view name);

// P, the tp-invariant reduction's number of chunks for a model: its query-head count, which every
// valid TP degree divides (model/shard_plan.hpp).
inline std::int64_t tp_invariant_chunks(const ModelConfig& config) {
  return config.num_heads;
}

}  // namespace selfspec
