// The report of `selfspec bench --prompts-file`: for each speculative configuration (controller x
// logits mode) a table of medians over prompts per task and overall, and the suite's part of the
// JSON object (per-task and overall figures per configuration, then one record per prompt).
// cmd_bench.cpp adds what every bench reports (model, backend, drafter, options).
#pragma once

#include "launch/bench/bench_stats.hpp"
#include "launch/bench/suite_figures.hpp"
#include "launch/prompt_suite.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <vector>

namespace selfspec::launch {

// What a suite run produced: the selected prompts, the runs of those that finished (runs[i] is
// prompts[i]'s), and the configurations (their names and totals, RunMatrix::specs).
struct SuiteResults {
  const std::vector<SuitePrompt>& prompts;
  const std::vector<PromptRuns>& runs;
  const std::vector<SpecTotals>& configs;
  bool greedy = true;

  // Greedy: (prompt, configuration) pairs whose speculative tokens differ from the
  // autoregressive ones. Greedy self-speculative decoding is lossless: any is a bug.
  int lossless_mismatches() const;
};

// One table per configuration: prompts, AR and speculative tokens/s, speedup, α, M, c, expected
// speedup, efficiency and (greedy) lossless prompts, per task and overall.
void print_suite_tables(std::FILE* to, const SuiteResults& results);

// {"results": [{controller, logits, per_task: {task: row}, overall: row}], "per_prompt": [...],
//  "finished_prompts", "lossless_mismatches" (greedy; null when sampling)}; rows as
// to_json(GroupFigures), records as to_json(SuitePrompt, PromptRuns).
nlohmann::json suite_json(const SuiteResults& results);

}  // namespace selfspec::launch
