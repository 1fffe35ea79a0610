#include "launch/bench/suite_report.hpp"

#include "launch/bench/bench_report.hpp"

#include <fmt/format.h>

#include <string>

namespace selfspec::launch {

namespace {

void print_table(std::FILE* to, const SuiteResults& results, std::size_t config) {
  const SpecTotals& totals = results.configs[config];
  fmt::print(to,
             "  controller {}, logits {}, draft vocabulary {} (medians over prompts):\n"
             "  {:<14} {:>7} {:>9} {:>10} {:>8} {:>6} {:>5} {:>6} {:>8} {:>10} {:>8}\n",
             totals.controller, logits_mode_name(totals.logits),
             draft_vocab_name(totals.draft_vocab), "task", "prompts", "AR tok/s", "spec tok/s",
             "speedup", "alpha", "M", "c", "expected", "efficiency", "lossless");
  for (const GroupFigures& g : suite_figures(results.prompts, results.runs, config)) {
    const std::string lossless =
        results.greedy ? fmt::format("{}/{}", g.lossless_prompts, g.prompts) : "n/a";
    const SpecFigures& m = g.median;
    fmt::print(to,
               "  {:<14} {:>7} {:>9.2f} {:>10.2f} {:>7.2f}x {:>6.3f} {:>5.2f} {:>6.3f} {:>7.2f}x "
               "{:>10.2f} {:>8}\n",
               g.group, g.measured, g.ar_tokens_per_s, g.spec_tokens_per_s, m.speedup,
               m.acceptance_rate, m.mean_accepted_length, m.cost_ratio, m.expected_speedup,
               m.efficiency, lossless);
  }
}

}  // namespace

int SuiteResults::lossless_mismatches() const {
  int mismatches = 0;
  for (const PromptRuns& run : runs) {
    for (const SpecTotals& spec : run.specs) mismatches += spec.prompts - spec.lossless_prompts;
  }
  return mismatches;
}

void print_suite_tables(std::FILE* to, const SuiteResults& results) {
  for (std::size_t c = 0; c < results.configs.size(); ++c) print_table(to, results, c);
  if (results.greedy && results.lossless_mismatches() > 0) {
    fmt::print(to,
               "  LOSSLESS CHECK FAILED: {} speculative run(s) differ from autoregressive "
               "decoding (a bug)\n",
               results.lossless_mismatches());
  }
}

nlohmann::json suite_json(const SuiteResults& results) {
  nlohmann::json out;
  out["results"] = nlohmann::json::array();
  for (std::size_t c = 0; c < results.configs.size(); ++c) {
    nlohmann::json entry = {{"controller", results.configs[c].controller},
                            {"logits", logits_mode_name(results.configs[c].logits)},
                            {"draft_vocab", results.configs[c].draft_vocab},
                            {"per_task", nlohmann::json::object()}};
    for (const GroupFigures& g : suite_figures(results.prompts, results.runs, c)) {
      if (g.group == "overall") {
        entry["overall"] = to_json(g, results.greedy);
      } else {
        entry["per_task"][g.group] = to_json(g, results.greedy);
      }
    }
    if (!results.configs[c].last_drafter_state.is_null()) {
      entry["drafter_state_last_prompt"] = results.configs[c].last_drafter_state;
    }
    out["results"].push_back(std::move(entry));
  }
  out["per_prompt"] = nlohmann::json::array();
  for (std::size_t i = 0; i < results.runs.size(); ++i) {
    out["per_prompt"].push_back(to_json(results.prompts[i], results.runs[i], results.greedy));
  }
  out["finished_prompts"] = results.runs.size();
  out["lossless_mismatches"] =
      results.greedy ? nlohmann::json(results.lossless_mismatches()) : nlohmann::json(nullptr);
  return out;
}

}  // namespace selfspec::launch
