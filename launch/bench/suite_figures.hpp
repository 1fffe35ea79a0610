// What `selfspec bench --prompts-file` measures per prompt, and the figures it reports per task
// and overall: for each speculative configuration, the median over prompts of each figure
// (tokens/s autoregressive and speculative, speedup, α, M, c, expected speedup, efficiency), each
// column its own median. Plain arithmetic over bench_stats' totals: report.hpp makes the JSON.
#pragma once

#include "launch/bench/bench_stats.hpp"
#include "launch/prompt_suite.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace selfspec::launch {

// One prompt's runs: its autoregressive run and each configuration's speculative run.
struct PromptRuns {
  std::int64_t prompt_tokens = 0;
  std::int64_t generated_tokens = 0;  // by the autoregressive run
  bool stopped_on_eos = false;        // the autoregressive run ended on an end-of-sequence id
  ArTotals ar;
  std::vector<SpecTotals> specs;  // one per configuration (prompts = 1), in the matrix's order

  // Whether the run decoded after its first token: only such prompts have speeds and ratios.
  bool measured() const { return ar.tokens > 0; }
  // Configuration `config` against this prompt's autoregressive run.
  SpecFigures figures(std::size_t config) const;
};

// One configuration's medians over a group of prompts (a task, or "overall").
struct GroupFigures {
  std::string group;
  int prompts = 0;           // prompts of the group that finished
  int measured = 0;          // of those, the ones the medians are over (PromptRuns::measured)
  int lossless_prompts = 0;  // greedy: speculative tokens equal to the autoregressive ones
  double ar_tokens_per_s = 0.0;
  double spec_tokens_per_s = 0.0;
  SpecFigures median;  // field by field
};

// Configuration `config` per task (the tasks of `prompts`, in known_prompt_tasks() order) and
// then "overall". runs[i] belongs to prompts[i]; after a stop signal runs may be shorter.
std::vector<GroupFigures> suite_figures(const std::vector<SuitePrompt>& prompts,
                                        const std::vector<PromptRuns>& runs, std::size_t config);

}  // namespace selfspec::launch
