#include "launch/bench/suite_figures.hpp"

#include "core/error.hpp"

#include <functional>

namespace selfspec::launch {

namespace {

// The median of one figure over the measured runs.
double median_of(const std::vector<const PromptRuns*>& runs,
                 const std::function<double(const PromptRuns&)>& figure) {
  std::vector<double> values;
  for (const PromptRuns* run : runs) values.push_back(figure(*run));
  return median(std::move(values));
}

GroupFigures group_figures(std::string group, const std::vector<const PromptRuns*>& runs,
                           std::size_t config) {
  GroupFigures g;
  g.group = std::move(group);
  g.prompts = static_cast<int>(runs.size());
  std::vector<const PromptRuns*> measured;
  for (const PromptRuns* run : runs) {
    g.lossless_prompts += run->specs[config].lossless_prompts;
    if (run->measured()) measured.push_back(run);
  }
  g.measured = static_cast<int>(measured.size());
  const auto figure = [&](double SpecFigures::*field) {
    return median_of(measured, [&](const PromptRuns& r) { return r.figures(config).*field; });
  };
  g.ar_tokens_per_s =
      median_of(measured, [](const PromptRuns& r) { return r.ar.tokens_per_second(); });
  g.spec_tokens_per_s =
      median_of(measured, [&](const PromptRuns& r) { return r.specs[config].tokens_per_second(); });
  g.median.speedup = figure(&SpecFigures::speedup);
  g.median.acceptance_rate = figure(&SpecFigures::acceptance_rate);
  g.median.mean_accepted_length = figure(&SpecFigures::mean_accepted_length);
  g.median.cost_ratio = figure(&SpecFigures::cost_ratio);
  g.median.verify_cost_ratio = figure(&SpecFigures::verify_cost_ratio);
  g.median.expected_speedup = figure(&SpecFigures::expected_speedup);
  g.median.efficiency = figure(&SpecFigures::efficiency);
  return g;
}

}  // namespace

SpecFigures PromptRuns::figures(std::size_t config) const {
  return compare_with_autoregressive(specs.at(config), ar);
}

std::vector<GroupFigures> suite_figures(const std::vector<SuitePrompt>& prompts,
                                        const std::vector<PromptRuns>& runs, std::size_t config) {
  SELFSPEC_CHECK(runs.size() <= prompts.size(), "suite_figures: {} runs for {} prompts",
                 runs.size(), prompts.size());
  std::vector<GroupFigures> groups;
  std::vector<const PromptRuns*> all;
  for (const std::string& task : tasks_of(prompts)) {
    std::vector<const PromptRuns*> members;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (prompts[i].task == task) members.push_back(&runs[i]);
    }
    groups.push_back(group_figures(task, members, config));
  }
  for (const PromptRuns& run : runs) all.push_back(&run);
  groups.push_back(group_figures("overall", all, config));
  return groups;
}

}  // namespace selfspec::launch
