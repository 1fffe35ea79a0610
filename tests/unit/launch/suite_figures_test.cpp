// The figures of `bench --prompts-file`: per task and overall, each column the median over the
// group's prompts of that prompt's own figure (against its own autoregressive run), prompts that
// decoded nothing after their first token left out of the medians, lossless prompts counted.
#include "launch/bench/suite_figures.hpp"

#include <gtest/gtest.h>

namespace selfspec::launch {
namespace {

// A prompt whose autoregressive run decoded `ar_tokens` tokens in 1 s (one forward per token)
// and whose speculative run decoded as many in `spec_seconds`: `drafted` drafts, `accepted` of
// them accepted, over `rounds` verifications; draft forwards take half an AR forward each.
PromptRuns prompt(std::int64_t ar_tokens, double spec_seconds, std::int64_t drafted,
                  std::int64_t accepted, std::int64_t rounds, bool lossless = true) {
  PromptRuns runs;
  runs.ar.tokens = ar_tokens;
  runs.ar.seconds = 1.0;
  runs.ar.stats.verify_forwards = ar_tokens;
  runs.ar.stats.verify_forward_s = 1.0;
  SpecTotals spec;
  spec.tokens = ar_tokens;
  spec.seconds = spec_seconds;
  spec.stats.drafted = drafted;
  spec.stats.accepted = accepted;
  spec.stats.draft_forwards = drafted;
  spec.stats.verify_forwards = rounds;
  spec.stats.round_tokens = ar_tokens;
  const double ar_forward = ar_tokens > 0 ? 1.0 / static_cast<double>(ar_tokens) : 0.0;
  spec.stats.draft_forward_s = 0.5 * ar_forward * static_cast<double>(drafted);
  spec.prompts = 1;
  spec.lossless_prompts = lossless ? 1 : 0;
  runs.specs.push_back(spec);
  return runs;
}

SuitePrompt of_task(const std::string& task) {
  SuitePrompt p;
  p.id = task;
  p.task = task;
  return p;
}

TEST(SuiteFigures, MediansPerTaskAndOverallInTaskOrder) {
  const std::vector<SuitePrompt> prompts = {of_task("maths"), of_task("chat"), of_task("maths"),
                                            of_task("chat"), of_task("maths")};
  const std::vector<PromptRuns> runs = {
      prompt(10, 0.5, 10, 5, 5),                       // maths: speedup 2, alpha 0.5, M 2
      prompt(20, 2.0, 8, 2, 10),                       // chat: speedup 0.5, alpha 0.25, M 2
      prompt(10, 0.25, 10, 8, 2),                      // maths: speedup 4, alpha 0.8, M 5
      prompt(20, 1.0, 8, 6, 5),                        // chat: speedup 1, alpha 0.75, M 4
      prompt(10, 1.0, 10, 1, 10, /*lossless=*/false),  // maths: speedup 1, alpha 0.1, M 1
  };
  const std::vector<GroupFigures> groups = suite_figures(prompts, runs, 0);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].group, "chat");
  EXPECT_EQ(groups[1].group, "maths");
  EXPECT_EQ(groups[2].group, "overall");

  const GroupFigures& chat = groups[0];
  EXPECT_EQ(chat.prompts, 2);
  EXPECT_EQ(chat.measured, 2);
  EXPECT_EQ(chat.lossless_prompts, 2);
  EXPECT_DOUBLE_EQ(chat.ar_tokens_per_s, 20.0);
  EXPECT_DOUBLE_EQ(chat.spec_tokens_per_s, 15.0);  // median of 10 and 20
  EXPECT_DOUBLE_EQ(chat.median.speedup, 0.75);
  EXPECT_DOUBLE_EQ(chat.median.acceptance_rate, 0.5);
  EXPECT_DOUBLE_EQ(chat.median.mean_accepted_length, 3.0);
  EXPECT_DOUBLE_EQ(chat.median.cost_ratio, 0.5);

  const GroupFigures& maths = groups[1];
  EXPECT_EQ(maths.prompts, 3);
  EXPECT_EQ(maths.lossless_prompts, 2);
  EXPECT_DOUBLE_EQ(maths.median.speedup, 2.0);
  EXPECT_DOUBLE_EQ(maths.median.acceptance_rate, 0.5);
  EXPECT_DOUBLE_EQ(maths.median.mean_accepted_length, 2.0);
  EXPECT_DOUBLE_EQ(maths.spec_tokens_per_s, 20.0);

  const GroupFigures& overall = groups[2];
  EXPECT_EQ(overall.prompts, 5);
  EXPECT_EQ(overall.lossless_prompts, 4);
  EXPECT_DOUBLE_EQ(overall.median.speedup, 1.0);               // 0.5 1 1 2 4
  EXPECT_DOUBLE_EQ(overall.median.acceptance_rate, 0.5);       // 0.1 0.25 0.5 0.75 0.8
  EXPECT_DOUBLE_EQ(overall.median.mean_accepted_length, 2.0);  // 1 2 2 4 5
  // Each prompt's expected speedup and efficiency come from its own α, M and c (eq. 6).
  const SpecFigures first = runs[0].figures(0);
  EXPECT_DOUBLE_EQ(first.expected_speedup, 2.0 * 0.5 / ((2.0 - 1.0) * 0.5 + 0.5));
  EXPECT_DOUBLE_EQ(first.efficiency, 2.0 / first.expected_speedup);
}

TEST(SuiteFigures, PromptsThatDecodedNothingStayOutOfTheMedians) {
  const std::vector<SuitePrompt> prompts = {of_task("qa"), of_task("qa"), of_task("qa")};
  // The first prompt ended at its first token (an end-of-sequence id): no speed, no ratios.
  const std::vector<PromptRuns> runs = {prompt(0, 0.0, 0, 0, 0), prompt(10, 0.5, 10, 5, 5),
                                        prompt(10, 1.0, 10, 5, 5)};
  const GroupFigures qa = suite_figures(prompts, runs, 0)[0];
  EXPECT_EQ(qa.prompts, 3);
  EXPECT_EQ(qa.measured, 2);
  EXPECT_EQ(qa.lossless_prompts, 3);
  EXPECT_DOUBLE_EQ(qa.median.speedup, 1.5);
  EXPECT_DOUBLE_EQ(qa.ar_tokens_per_s, 10.0);
}

TEST(SuiteFigures, AStoppedRunCoversTheFinishedPromptsOnly) {
  const std::vector<SuitePrompt> prompts = {of_task("chat"), of_task("code")};
  const std::vector<PromptRuns> runs = {prompt(10, 0.5, 10, 5, 5)};
  const std::vector<GroupFigures> groups = suite_figures(prompts, runs, 0);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[1].group, "code");
  EXPECT_EQ(groups[1].prompts, 0);
  EXPECT_DOUBLE_EQ(groups[1].median.speedup, 0.0);
  EXPECT_EQ(groups[2].prompts, 1);
}

}  // namespace
}  // namespace selfspec::launch
