// Draft & Verify's offline skip-set search (§3.3, Fig. 3) as a collective job: Bayesian
// optimisation (optim/binary_bayes_optimizer.hpp) over the interior sublayers
// (skip_search_space.hpp), each candidate scored by the expected speedup
// (expected_speedup.hpp) from its matchness α on the calibration set (matchness.hpp) and its cost
// c from the measured cost table (sublayer_cost_table.hpp). D&V minimises the measured time per
// verified token; we optimise its deterministic model instead, so that the search is reproducible
// and resumable and does not chase timer noise; the command measures the winner's real tokens/s.
//
// Tensor parallelism: rank 0 runs the optimiser and keeps the state; before every evaluation it
// broadcasts {continue or stop, the plan's mask words}; every rank runs the same forwards.
// Stop requests (SIGTERM, SIGINT, SIGUSR1) are polled on rank 0 between evaluations: the state is
// already on disk, and the search ends early with `interrupted` set.
#pragma once

#include "comm/communicator.hpp"
#include "draft/skip_search_space.hpp"
#include "model/llama_model.hpp"
#include "optim/binary_bayes_optimizer.hpp"
#include "search/matchness.hpp"
#include "search/search_state.hpp"
#include "search/sublayer_cost_table.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <optional>

namespace selfspec {

struct SkipSearchOptions {
  int budget = 200;  // evaluations in all (a resumed search counts the ones already done)
  Acquisition acquisition = Acquisition::kUcb;
  double ucb_kappa = 2.0;
  std::uint64_t seed = 0;
  int initial_random = 8;
  std::vector<double> initial_uniform = {0.1, 0.2, 0.3, 0.4};  // uniform sets tried first
  double min_skip_ratio = 0.05;  // of the 2(L−2) searchable sublayers
  double max_skip_ratio = 0.6;
  std::filesystem::path state_file;  // rank 0; required
  std::filesystem::path log_file;    // rank 0; empty: no log
  bool resume = false;
  std::optional<std::filesystem::path> cost_table_file;  // reuse a table instead of timing one
  CostTableOptions cost;
  double head_kept = 1.0;   // share of the vocabulary a pruned draft head keeps (V'/V)
  nlohmann::json settings;  // the caller's description of the run (model, prompts, ...): must
                            // match the state's on --resume
  std::function<int()> interrupt;  // rank 0: non-zero stops after the current evaluation
};

struct SkipSearchResult {
  std::vector<SearchEvaluation> evaluations;  // rank 0
  std::size_t best = 0;                       // index into evaluations (rank 0)
  SublayerCostTable cost_table;               // rank 0
  int resumed_from = 0;                       // evaluations loaded from the state
  int interrupted = 0;                        // the stop signal, on every rank
};

class SkipSearch {
 public:
  SkipSearch(LlamaModel& model, Communicator& comm, MatchnessEvaluator& evaluator,
             SkipSearchOptions options);
  // Collective. Times (or loads) the cost table, then evaluates until the budget is spent or a
  // stop is requested.
  SkipSearchResult run();

 private:
  void prepare(SkipSearchResult& result);
  BinaryBayesOptions optimizer_options() const;
  SearchEvaluation evaluate(const BinaryMask& mask, const SublayerCostTable& table);
  void record(const SearchEvaluation& evaluation, SearchState& state, const SkipSearchResult& r);

  LlamaModel& model_;
  Communicator& comm_;
  MatchnessEvaluator& evaluator_;
  SkipSearchOptions options_;
  int layers_;
  SkipSearchSpace space_;
};

}  // namespace selfspec
