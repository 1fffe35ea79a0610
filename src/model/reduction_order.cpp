#include "model/reduction_order.hpp"

namespace selfspec {

std::string_view reduction_order_name(ReductionOrder order) {
  return order == ReductionOrder::kTpInvariant ? "tp-invariant" : "rank-order";
}

std::optional<ReductionOrder> parse_reduction_order(std::string_view name) {
  if (name == "rank-order") return ReductionOrder::kRankOrder;
  if (name == "tp-invariant") return ReductionOrder::kTpInvariant;
  return std::nullopt;
}

}  // namespace selfspec
