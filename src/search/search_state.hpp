// What a skip-set search has done, on disk: every evaluation (also appended to a JSON Lines log as
// it happens), the cost table the objective used, and the settings that make the run what it is.
// `--resume` reloads the state, checks that the settings are the same, and continues: the
// optimiser's proposals depend only on its settings and this history
// (optim/binary_bayes_optimizer.hpp) and the objective only on the mask, the calibration set and
// the stored cost table, so a killed search that resumes ends where an uninterrupted one ends.
// The state file is replaced atomically (write, flush, rename) after every evaluation.
#pragma once

#include "optim/binary_bayes_optimizer.hpp"
#include "search/sublayer_cost_table.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace selfspec {

struct SearchEvaluation {
  int iteration = 0;
  std::string phase;  // "initial", "random", "bo"
  BinaryMask mask;
  std::vector<int> attention;  // skipped layers (from the mask)
  std::vector<int> mlp;
  std::int64_t matches = 0;
  std::int64_t positions = 0;
  double alpha = 0.0;  // matches / positions
  double cost = 0.0;   // c from the cost table
  int draft_length = 0;
  double tokens_per_round = 1.0;
  double objective = 0.0;  // expected speedup with the measured verification cost
  double eq6 = 0.0;        // expected speedup with v ≡ 1 (SWIFT eq. 6 as printed)
  double seconds = 0.0;    // wall time of the evaluation

  nlohmann::json to_json() const;
  static SearchEvaluation from_json(const nlohmann::json& json, const std::string& what);
};

struct SearchState {
  nlohmann::json settings;  // must match for --resume
  SublayerCostTable cost_table;
  std::vector<SearchEvaluation> evaluations;

  nlohmann::json to_json() const;
};

void save_search_state(const std::filesystem::path& path, const SearchState& state);
// Throws selfspec::Error naming the file and the key when it is not a search state.
SearchState load_search_state(const std::filesystem::path& path);

// The index of the best evaluation (highest objective; the earliest among equals). Throws for none.
std::size_t best_evaluation(const std::vector<SearchEvaluation>& evaluations);

}  // namespace selfspec
