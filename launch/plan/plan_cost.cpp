// `plan --comm-table`: options, inputs and output of the decode cost model
// (launch/plan/comm_cost_model.hpp; formulas and sources there).
#include "launch/plan/plan_cost.hpp"

#include "control/draft_length_controller.hpp"
#include "core/error.hpp"
#include "core/human_units.hpp"
#include "core/setting_spec.hpp"
#include "draft/skip_set.hpp"
#include "launch/speculative_cli.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

namespace selfspec::launch {
namespace {

constexpr double kDefaultSkipFraction = 0.5;  // SWIFT App. B.2: r = 0.5 for 70B models

std::string milliseconds(double seconds) {
  return fmt::format("{:.3f} ms", seconds * 1e3);
}

// The draft plan: --skip-fraction (uniform), else --skip-config, else uniform at 0.5.
std::pair<LayerPlan, std::string> draft_plan(const PlanCostOptions& options, int layers) {
  if (!options.skip_fraction && !options.skip_config.empty()) {
    const SkipSet set = load_skip_set(options.skip_config);
    return {set.plan(layers), fmt::format("skip set {} ({})", set.name, options.skip_config)};
  }
  const double fraction = options.skip_fraction.value_or(kDefaultSkipFraction);
  const SkipSet set = uniform_skip_set(layers, fraction);
  return {set.plan(layers), fmt::format("uniform skipping of {:g} of the sublayers{}", fraction,
                                        options.skip_fraction ? "" : " (default)")};
}

std::string describe_collectives(const StepCost& step) {
  std::string text;
  for (const PricedCollectives& c : step.collectives) {
    const std::string_view name = collective_name(c.calls.op);
    text += fmt::format("{}{} x {} {}{}", text.empty() ? "" : ", ", c.calls.count, name,
                        message_bytes(c.calls.bytes),
                        c.priced_as == name ? "" : fmt::format(" (as {})", c.priced_as));
  }
  return text.empty() ? "none" : text;
}

void print_step(const StepCost& step) {
  fmt::print("  {:<7}{:>4}  {:>10}  {:>11}  {:>11}  {:>11}  {}\n", step.kind, step.tokens,
             human_bytes(step.weight_bytes), milliseconds(step.weight_s), milliseconds(step.comm_s),
             milliseconds(step.total_s()), describe_collectives(step));
}

nlohmann::json step_json(const StepCost& step) {
  nlohmann::json collectives = nlohmann::json::array();
  for (const PricedCollectives& c : step.collectives) {
    collectives.push_back({{"op", collective_name(c.calls.op)},
                           {"priced_as", c.priced_as},
                           {"bytes", c.calls.bytes},
                           {"count", c.calls.count},
                           {"seconds_each", c.seconds_each}});
  }
  return {{"tokens", step.tokens},     {"weight_bytes", step.weight_bytes},
          {"weight_s", step.weight_s}, {"comm_s", step.comm_s},
          {"total_s", step.total_s()}, {"collectives", collectives}};
}

}  // namespace

void add_plan_cost_options(CLI::App& command, PlanCostOptions& options) {
  command
      .add_option("--comm-table", options.comm_table,
                  "comm table (JSON from comm_bench, or YAML, configs/comm/): also predict the "
                  "per-token decode latency, plain and self-speculative")
      ->check(CLI::ExistingFile);
  command
      .add_option("--memory-bandwidth", options.memory_bandwidth_gbps,
                  "with --comm-table: memory bandwidth per rank in GB/s (default: the table's)")
      ->check(CLI::PositiveNumber);
  command.add_option("--alpha", options.alpha, "with --comm-table: draft acceptance rate α")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command
      .add_option("--draft-len", options.draft_len, "with --comm-table: draft tokens per round K")
      ->check(CLI::Range(1, kMaxDraftTokens))
      ->capture_default_str();
  command
      .add_option("--skip-fraction,--skip-uniform", options.skip_fraction,
                  "with --comm-table: the draft skips this fraction of the 2L sublayers, spread "
                  "uniformly (default: the run config's skip set, else 0.5)")
      ->check(CLI::Range(0.0, 1.0))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  command
      .add_option("--skip-config", options.skip_config,
                  "with --comm-table: the draft's skip set file (configs/skips/)")
      ->check(CLI::ExistingFile);
  // A run config may give bench's list ("local,gather"): the first item is priced.
  command
      .add_option("--logits", options.logits,
                  "with --comm-table: how rank 0 reads the logits, local or gather (of a list, "
                  "the first)")
      ->check(setting_validator(*find_setting(speculative_settings(), "logits"), true))
      ->capture_default_str();
}

PlanCost plan_cost(const PlanCostOptions& options, const ModelConfig& config,
                   const std::vector<RankPlan>& ranks, const WeightFormatOf& weights,
                   std::optional<WeightFormat> draft_weights) {
  PlanCost cost;
  cost.table = load_comm_table(options.comm_table);
  if (options.memory_bandwidth_gbps > 0.0) {
    cost.model.memory_bytes_per_s = options.memory_bandwidth_gbps * 1e9;
    cost.bandwidth_from = "--memory-bandwidth";
  } else {
    SELFSPEC_CHECK(
        cost.table.memory_read_bytes_per_s.has_value(),
        "--comm-table {}: the table gives no memory bandwidth (memory.read_bytes_per_s); "
        "pass --memory-bandwidth GBPS",
        options.comm_table);
    cost.model.memory_bytes_per_s = *cost.table.memory_read_bytes_per_s;
    cost.bandwidth_from = "table";
  }
  cost.model.alpha = options.alpha;
  cost.model.draft_len = options.draft_len;
  cost.model.logits =
      split_list(options.logits).front() == "gather" ? LogitsMode::kGather : LogitsMode::kLocal;
  auto [plan, from] = draft_plan(options, static_cast<int>(config.num_layers));
  cost.model.draft_plan = plan;
  cost.draft_from = std::move(from);
  cost.prediction = predict_decode_cost(decode_geometry(config, ranks, weights, draft_weights),
                                        cost.table, cost.model);
  return cost;
}

nlohmann::json plan_cost_json(const PlanCost& cost) {
  const CommTable& table = cost.table;
  const CostPrediction& p = cost.prediction;
  const LayerPlan& draft = cost.model.draft_plan;
  return {
      {"comm_table", table.origin},
      {"transport", table.transport},
      {"table_ranks", table.ranks},
      {"table_nodes", table.nodes},
      {"memory_bandwidth_bytes_per_s", cost.model.memory_bytes_per_s},
      {"memory_bandwidth_from", cost.bandwidth_from},
      {"logits", logits_mode_name(cost.model.logits)},
      {"alpha", cost.model.alpha},
      {"draft_len", cost.model.draft_len},
      {"draft",
       {{"from", cost.draft_from},
        {"skipped_attention", draft.skipped_attention().size()},
        {"skipped_mlp", draft.skipped_mlp().size()},
        {"skipped_fraction",
         static_cast<double>(draft.skipped_count()) / (2.0 * draft.num_layers())}}},
      {"forwards",
       {{"plain", step_json(p.plain)},
        {"draft", step_json(p.draft)},
        {"verify", step_json(p.verify)}}},
      {"expected_tokens_per_round", p.expected_tokens},
      {"per_token_s", {{"plain", p.plain_per_token_s}, {"self_speculative", p.spec_per_token_s}}},
      {"tokens_per_s",
       {{"plain", 1.0 / p.plain_per_token_s}, {"self_speculative", 1.0 / p.spec_per_token_s}}},
      {"speedup", p.speedup},
      {"comm_fraction",
       {{"plain", p.plain_comm_fraction}, {"self_speculative", p.spec_comm_fraction}}}};
}

void print_plan_cost(const PlanCost& cost, int tp) {
  const CommTable& table = cost.table;
  const CostPrediction& p = cost.prediction;
  const LayerPlan& draft = cost.model.draft_plan;
  fmt::print("cost model  comm table {}: {}, {} rank(s) on {} node(s)\n", table.origin,
             table.transport, table.ranks > 0 ? fmt::format("{}", table.ranks) : "?",
             table.nodes > 0 ? fmt::format("{}", table.nodes) : "?");
  if (table.ranks > 0 && table.ranks != tp)
    fmt::print("            note: measured with {} ranks, priced here for TP {}\n", table.ranks,
               tp);
  fmt::print(
      "            memory {:.1f} GB/s per rank ({}); logits {}; alpha {:.2f}, K {} "
      "(E = {:.2f} tokens per round)\n",
      cost.model.memory_bytes_per_s / 1e9, cost.bandwidth_from, logits_mode_name(cost.model.logits),
      cost.model.alpha, cost.model.draft_len, p.expected_tokens);
  fmt::print("            draft: {}: skips {} of {} attention and {} of {} MLP sublayers\n",
             cost.draft_from, draft.skipped_attention().size(), draft.num_layers(),
             draft.skipped_mlp().size(), draft.num_layers());
  fmt::print("  {:<7}{:>4}  {:>10}  {:>11}  {:>11}  {:>11}  {}\n", "forward", "T", "weights",
             "weight time", "comm time", "total", "collectives (count x op size)");
  for (const StepCost* step : {&p.plain, &p.draft, &p.verify}) print_step(*step);
  fmt::print("per token   plain            {} ({:.1f} tokens/s), {:.1f}% in communication\n",
             milliseconds(p.plain_per_token_s), 1.0 / p.plain_per_token_s,
             100.0 * p.plain_comm_fraction);
  fmt::print(
      "            self-speculative {} = ({} x {} + {}) / {:.2f} ({:.1f} tokens/s), {:.1f}% in "
      "communication\n",
      milliseconds(p.spec_per_token_s), cost.model.draft_len, milliseconds(p.draft.total_s()),
      milliseconds(p.verify.total_s()), p.expected_tokens, 1.0 / p.spec_per_token_s,
      100.0 * p.spec_comm_fraction);
  fmt::print("            predicted speedup {:.2f}x\n", p.speedup);
}

}  // namespace selfspec::launch
