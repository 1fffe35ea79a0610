// Prompt suites for `selfspec bench --prompts-file`: JSON Lines files of real-text prompts, one
// {"id", "task", "split", "prompt"} object per line (the format is described in
// bench/prompts/README.md), read with strict validation — every error names FILE:LINE and the key
// at fault — and the selection a run measures (--split, --tasks, --max-prompts-per-task).
//
// The split is what keeps tuning honest: anything tuned (skip sets, controller parameters) is
// tuned on "calibration" prompts only, and reports use "evaluation" prompts, the default.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace selfspec::launch {

// The tasks a suite may name, in the order reports list them when a run mixes them.
const std::vector<std::string>& known_prompt_tasks();

enum class PromptSplit { kCalibration, kEvaluation };
std::string_view prompt_split_name(PromptSplit split);

// One prompt of a suite.
struct SuitePrompt {
  std::string id;  // unique across the files of a run
  std::string task;
  PromptSplit split = PromptSplit::kEvaluation;
  std::string text;
  std::string source;  // "FILE:LINE", for messages
};

// Parses the text of one suite file (`path` names it in errors). Every non-blank line must be a
// JSON object with exactly the string keys id, task, split and prompt: id and prompt not empty,
// task one of known_prompt_tasks(), split "calibration" or "evaluation"; ids are unique.
std::vector<SuitePrompt> parse_prompt_suite(std::string_view text, const std::string& path);

// Reads and parses the files in order; ids must be unique across all of them.
std::vector<SuitePrompt> read_prompt_suite(const std::vector<std::string>& paths);

// What a run measures: --split evaluation|calibration|all, --tasks (empty: every task),
// --max-prompts-per-task (0: no limit).
struct PromptSelection {
  std::string split = "evaluation";
  std::vector<std::string> tasks;
  int max_per_task = 0;
};

inline const std::vector<std::string> kPromptSplitChoices = {"evaluation", "calibration", "all"};

// The selected prompts in file order: those of the split, of the requested tasks, the first
// max_per_task of each task. Throws (naming the option) when a requested task has no prompt in
// the split, or when nothing is selected.
std::vector<SuitePrompt> select_prompts(const std::vector<SuitePrompt>& suite,
                                        const PromptSelection& selection);

// The tasks present in `prompts`, in known_prompt_tasks() order.
std::vector<std::string> tasks_of(const std::vector<SuitePrompt>& prompts);

}  // namespace selfspec::launch
