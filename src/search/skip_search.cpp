// Draft & Verify's offline skip-set search: see skip_search.hpp.
#include "search/skip_search.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "draft/skip_set.hpp"
#include "search/expected_speedup.hpp"

#include <array>
#include <chrono>
#include <cmath>
#include <fstream>

namespace selfspec {

namespace {

// Rank 0's word before every evaluation.
struct SearchCommand {
  std::uint32_t go = 0;  // 1: evaluate the mask below; 0: the search is over
  std::int32_t interrupted = 0;
  std::array<std::uint64_t, LayerPlan::kMaskWords> plan_words{};
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string format_eta(double seconds) {
  const auto s = static_cast<long>(std::lround(seconds));
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60)
                   : fmt::format("{}m{:02}s", s / 60, s % 60);
}

void rewrite_log(const std::filesystem::path& path, const std::vector<SearchEvaluation>& done) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::trunc);
  SELFSPEC_CHECK(out.good(), "cannot write the search log {}", path.string());
  for (const SearchEvaluation& e : done) out << e.to_json().dump() << "\n";
}

}  // namespace

SkipSearch::SkipSearch(LlamaModel& model, Communicator& comm, MatchnessEvaluator& evaluator,
                       SkipSearchOptions options)
    : model_(model),
      comm_(comm),
      evaluator_(evaluator),
      options_(std::move(options)),
      layers_(static_cast<int>(model.config().num_layers)),
      space_(layers_) {
  SELFSPEC_CHECK(options_.budget >= 1, "--budget {} must be at least 1", options_.budget);
  SELFSPEC_CHECK(options_.min_skip_ratio >= 0.0 &&
                     options_.min_skip_ratio <= options_.max_skip_ratio &&
                     options_.max_skip_ratio <= 1.0,
                 "skip ratio range [{}, {}] must lie within [0, 1]", options_.min_skip_ratio,
                 options_.max_skip_ratio);
  SELFSPEC_CHECK(comm.rank() != 0 || !options_.state_file.empty(),
                 "a skip-set search needs a state file");
}

BinaryBayesOptions SkipSearch::optimizer_options() const {
  BinaryBayesOptions o;
  o.dims = space_.dims();
  o.min_ones = std::max(1, static_cast<int>(std::ceil(options_.min_skip_ratio * o.dims)));
  o.max_ones = std::max(o.min_ones, static_cast<int>(std::floor(options_.max_skip_ratio * o.dims)));
  for (double ratio : options_.initial_uniform) {
    // uniform_skip_set counts the ratio over all 2L sublayers and spreads whole layers over the
    // interior (draft/skip_set.hpp).
    const SkipSet set = uniform_skip_set(layers_, ratio);
    const BinaryMask mask = space_.mask(set.plan(layers_));
    const int ones = count_ones(mask);
    if (ones >= o.min_ones && ones <= o.max_ones) o.initial_design.push_back(mask);
  }
  o.initial_random = options_.initial_random;
  o.acquisition = options_.acquisition;
  o.ucb_kappa = options_.ucb_kappa;
  o.seed = options_.seed;
  return o;
}

void SkipSearch::prepare(SkipSearchResult& result) {
  // Rank 0 decides where the cost table comes from; timing it is collective.
  std::int32_t measure = 1;
  SearchState loaded;
  if (comm_.rank() == 0) {
    if (options_.resume && std::filesystem::exists(options_.state_file)) {
      loaded = load_search_state(options_.state_file);
      SELFSPEC_CHECK(loaded.settings == options_.settings,
                     "--resume: {} was made by a different search (settings differ: it has {}, "
                     "this run {})",
                     options_.state_file.string(), loaded.settings.dump(),
                     options_.settings.dump());
      SELFSPEC_CHECK(loaded.cost_table.num_layers == layers_,
                     "--resume: {} holds a cost table for {} layers", options_.state_file.string(),
                     loaded.cost_table.num_layers);
      result.cost_table = loaded.cost_table;
      result.evaluations = loaded.evaluations;
      result.resumed_from = static_cast<int>(loaded.evaluations.size());
      measure = 0;
    } else if (options_.cost_table_file) {
      std::ifstream in(*options_.cost_table_file);
      SELFSPEC_CHECK(in.good(), "--cost-table: cannot read {}", options_.cost_table_file->string());
      nlohmann::json json;
      try {
        json = nlohmann::json::parse(in);
      } catch (const nlohmann::json::exception& e) {
        fail("--cost-table {}: invalid JSON: {}", options_.cost_table_file->string(), e.what());
      }
      result.cost_table = SublayerCostTable::from_json(json, options_.cost_table_file->string());
      SELFSPEC_CHECK(result.cost_table.num_layers == layers_,
                     "--cost-table {} is for {} layers, the model has {}",
                     options_.cost_table_file->string(), result.cost_table.num_layers, layers_);
      measure = 0;
    }
  }
  comm_.broadcast_object(measure, 0);
  if (measure != 0) {
    SublayerCostTable table = measure_cost_table(model_, options_.cost);
    if (comm_.rank() == 0) result.cost_table = std::move(table);
  }
  if (comm_.rank() == 0) {
    const SublayerCostTable& t = result.cost_table;
    log::info(
        "cost table: full forward {:.2f} ms = fixed {:.2f} (LM head {:.2f}) + {} × (attention "
        "{:.3f} + MLP {:.3f}) ms; v(γ=4) {:.2f}; fit residual {:.1f} %",
        1e3 * t.full_seconds(), 1e3 * t.fixed_s, 1e3 * t.head_s, layers_, 1e3 * t.attention_s[0],
        1e3 * t.mlp_s[0], t.verify_ratio[static_cast<std::size_t>(std::min(4, t.max_draft()))],
        100.0 * t.fit_max_residual);
  }
}

SearchEvaluation SkipSearch::evaluate(const BinaryMask& mask, const SublayerCostTable& table) {
  const LayerPlan plan = space_.plan(mask);
  const auto start = std::chrono::steady_clock::now();
  const DraftMatch count = evaluator_.evaluate(plan);
  SearchEvaluation e;
  e.mask = mask;
  e.attention = plan.skipped_attention();
  e.mlp = plan.skipped_mlp();
  e.matches = count.matches;
  e.positions = count.positions;
  e.alpha = count.rate();
  e.cost = table.cost_ratio(plan, options_.head_kept);
  const SpeedupEstimate best = best_expected_speedup(e.alpha, e.cost, table.verify_ratio);
  e.draft_length = best.draft_length;
  e.tokens_per_round = best.tokens_per_round;
  e.objective = best.speedup;
  e.eq6 = best_expected_speedup_eq6(e.alpha, e.cost, table.max_draft()).speedup;
  e.seconds = seconds_since(start);
  return e;
}

void SkipSearch::record(const SearchEvaluation& e, SearchState& state, const SkipSearchResult& r) {
  state.evaluations.push_back(e);
  save_search_state(options_.state_file, state);
  if (!options_.log_file.empty()) {
    std::ofstream log(options_.log_file, std::ios::app);
    SELFSPEC_CHECK(log.good(), "cannot append to the search log {}", options_.log_file.string());
    log << e.to_json().dump() << "\n";
  }
  const SearchEvaluation& best = state.evaluations[best_evaluation(state.evaluations)];
  double spent = 0.0;
  for (std::size_t i = static_cast<std::size_t>(r.resumed_from); i < state.evaluations.size(); ++i)
    spent += state.evaluations[i].seconds;
  const auto fresh = static_cast<double>(state.evaluations.size()) - r.resumed_from;
  const double eta =
      spent / fresh * (options_.budget - static_cast<double>(state.evaluations.size()));
  log::info(
      "search {}/{} [{}] skip {:2} α {:.3f} c {:.3f} → {:.3f}x | best {:.3f}x (α {:.3f} c "
      "{:.3f}, attn {} mlp {}) | ETA {}",
      state.evaluations.size(), options_.budget, e.phase, e.attention.size() + e.mlp.size(),
      e.alpha, e.cost, e.objective, best.objective, best.alpha, best.cost, best.attention.size(),
      best.mlp.size(), format_eta(eta));
}

SkipSearchResult SkipSearch::run() {
  SkipSearchResult result;
  prepare(result);
  SearchState state;
  std::optional<BinaryBayesOptimizer> optimizer;
  if (comm_.rank() == 0) {
    state.settings = options_.settings;
    state.cost_table = result.cost_table;
    state.evaluations = result.evaluations;
    rewrite_log(options_.log_file, state.evaluations);
    save_search_state(options_.state_file, state);
    optimizer.emplace(optimizer_options());
  }
  for (;;) {
    SearchCommand command;
    BinaryMask mask;
    if (comm_.rank() == 0) {
      const int signal = options_.interrupt ? options_.interrupt() : 0;
      command.interrupted = signal;
      command.go = signal == 0 && static_cast<int>(state.evaluations.size()) < options_.budget;
      if (command.go != 0) {
        std::vector<MaskObservation> history;
        for (const SearchEvaluation& e : state.evaluations)
          history.push_back({e.mask, e.objective});
        mask = optimizer->propose(history);
        space_.plan(mask).to_mask(command.plan_words);
      }
    }
    comm_.broadcast_object(command, 0);
    if (command.go == 0) {
      result.interrupted = command.interrupted;
      break;
    }
    const LayerPlan plan = LayerPlan::from_mask(layers_, command.plan_words);
    if (comm_.rank() != 0) {
      evaluator_.evaluate(plan);
      continue;
    }
    SearchEvaluation e = evaluate(mask, state.cost_table);
    e.iteration = static_cast<int>(state.evaluations.size());
    e.phase = std::string(optimizer->phase(state.evaluations.size()));
    record(e, state, result);
  }
  if (comm_.rank() == 0) {
    result.evaluations = state.evaluations;
    result.best = best_evaluation(state.evaluations);
  }
  return result;
}

}  // namespace selfspec
