// `selfspec plan --comm-table FILE`: the options of the decode cost model, the prediction for the
// planned split, and its text and JSON ("cost_model") output. The model itself:
// launch/plan/comm_cost_model.hpp.
#pragma once

#include "comm/comm_table.hpp"
#include "launch/plan/comm_cost_model.hpp"
#include "launch/rank_plan.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace selfspec::launch {

struct PlanCostOptions {
  std::string comm_table;              // empty: no cost model
  double memory_bandwidth_gbps = 0.0;  // 0: the table's
  double alpha = 0.8;
  int draft_len = 4;
  std::optional<double> skip_fraction;  // --skip-fraction (alias --skip-uniform)
  std::string skip_config;              // --skip-config FILE
  std::string logits = "local";
};

// --comm-table, --memory-bandwidth, --alpha, --draft-len, --skip-fraction (--skip-uniform),
// --skip-config, --logits.
void add_plan_cost_options(CLI::App& command, PlanCostOptions& options);

struct PlanCost {
  CommTable table;
  CostModelOptions model;
  std::string bandwidth_from;  // "table" or "--memory-bandwidth"
  std::string draft_from;      // where the draft plan came from
  CostPrediction prediction;
};

// The prediction for `ranks` (a valid split). Throws selfspec::Error (table, options, skip set).
// `draft_weights`: the format of a --draft-weights copy the drafts read.
PlanCost plan_cost(const PlanCostOptions& options, const ModelConfig& config,
                   const std::vector<RankPlan>& ranks, const WeightFormatOf& weights,
                   std::optional<WeightFormat> draft_weights = std::nullopt);

nlohmann::json plan_cost_json(const PlanCost& cost);
void print_plan_cost(const PlanCost& cost, int tp);

}  // namespace selfspec::launch
