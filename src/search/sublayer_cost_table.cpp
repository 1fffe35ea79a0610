// The per-sublayer cost table: see sublayer_cost_table.hpp.
#include "search/sublayer_cost_table.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "model/forward_timing.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace selfspec {

namespace {

// The four timed plans: their attention and MLP sublayer counts and the plans themselves.
struct TimedPlan {
  LayerPlan plan;
  int attention = 0;
  int mlp = 0;
};

std::vector<TimedPlan> timed_plans(int layers) {
  std::vector<int> interior(static_cast<std::size_t>(layers - 2));
  std::iota(interior.begin(), interior.end(), 1);
  const std::vector<int> none;
  return {{LayerPlan::full(layers), layers, layers},
          {LayerPlan::skipping(layers, interior, none), 2, layers},
          {LayerPlan::skipping(layers, none, interior), layers, 2},
          {LayerPlan::skipping(layers, interior, interior), 2, 2}};
}

// Least squares t = fixed + n_attention·a + n_mlp·m over the four plans.
void fit_sublayers(const std::vector<TimedPlan>& plans, const std::vector<double>& seconds,
                   SublayerCostTable& table) {
  Eigen::MatrixXd a(static_cast<Eigen::Index>(plans.size()), 3);
  Eigen::VectorXd b(static_cast<Eigen::Index>(plans.size()));
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const auto r = static_cast<Eigen::Index>(i);
    a(r, 0) = 1.0;
    a(r, 1) = plans[i].attention;
    a(r, 2) = plans[i].mlp;
    b(r) = seconds[i];
  }
  const Eigen::VectorXd x = a.colPivHouseholderQr().solve(b);
  const Eigen::VectorXd residual = a * x - b;
  table.fit_max_residual = residual.cwiseAbs().maxCoeff() / seconds[0];
  // Noise can push a tiny sublayer's fit below zero; a cost is never negative.
  const double attention = std::max(x(1), 0.0);
  const double mlp = std::max(x(2), 0.0);
  table.fixed_s = std::max(x(0), 0.0);
  table.attention_s.assign(static_cast<std::size_t>(table.num_layers), attention);
  table.mlp_s.assign(static_cast<std::size_t>(table.num_layers), mlp);
}

std::vector<double> json_doubles(const nlohmann::json& json, const char* key,
                                 const std::string& what) {
  SELFSPEC_CHECK(json.contains(key) && json[key].is_array(),
                 "{}: cost table key '{}' must be an "
                 "array of numbers",
                 what, key);
  std::vector<double> values;
  for (const auto& v : json[key]) {
    SELFSPEC_CHECK(v.is_number() && v.get<double>() >= 0.0,
                   "{}: cost table '{}' holds {} (expected a non-negative number)", what, key,
                   v.dump());
    values.push_back(v.get<double>());
  }
  return values;
}

}  // namespace

double SublayerCostTable::forward_seconds(const LayerPlan& plan) const {
  SELFSPEC_CHECK(plan.num_layers() == num_layers, "cost table is for {} layers, the plan has {}",
                 num_layers, plan.num_layers());
  double t = fixed_s;
  for (int l = 0; l < num_layers; ++l) {
    if (plan.runs_attention(l)) t += attention_s[static_cast<std::size_t>(l)];
    if (plan.runs_mlp(l)) t += mlp_s[static_cast<std::size_t>(l)];
  }
  return t;
}

double SublayerCostTable::full_seconds() const {
  return forward_seconds(LayerPlan::full(num_layers));
}

double SublayerCostTable::cost_ratio(const LayerPlan& plan, double head_kept) const {
  SELFSPEC_CHECK(head_kept > 0.0 && head_kept <= 1.0, "kept share of the LM head {} outside (0, 1]",
                 head_kept);
  return (forward_seconds(plan) - (1.0 - head_kept) * head_s) / full_seconds();
}

nlohmann::json SublayerCostTable::to_json() const {
  return {{"num_layers", num_layers},
          {"fixed_s", fixed_s},
          {"head_s", head_s},
          {"attention_s", attention_s},
          {"mlp_s", mlp_s},
          {"verify_ratio", verify_ratio},
          {"fit_max_residual", fit_max_residual},
          {"device", device},
          {"threads", threads},
          {"tp", tp},
          {"context", context},
          {"forwards", forwards},
          {"rounds", rounds}};
}

SublayerCostTable SublayerCostTable::from_json(const nlohmann::json& json,
                                               const std::string& what) {
  SELFSPEC_CHECK(json.is_object(), "{}: a cost table must be a JSON object", what);
  SublayerCostTable t;
  try {
    t.num_layers = json.at("num_layers").get<int>();
    t.fixed_s = json.at("fixed_s").get<double>();
    t.head_s = json.value("head_s", 0.0);
    t.fit_max_residual = json.value("fit_max_residual", 0.0);
    t.device = json.value("device", std::string());
    t.threads = json.value("threads", 0);
    t.tp = json.value("tp", 1);
    t.context = json.value("context", std::int64_t{0});
    t.forwards = json.value("forwards", 0);
    t.rounds = json.value("rounds", 0);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: cost table: {}", what, e.what());
  }
  t.attention_s = json_doubles(json, "attention_s", what);
  t.mlp_s = json_doubles(json, "mlp_s", what);
  t.verify_ratio = json_doubles(json, "verify_ratio", what);
  SELFSPEC_CHECK(t.num_layers >= 1 &&
                     t.attention_s.size() == static_cast<std::size_t>(t.num_layers) &&
                     t.mlp_s.size() == t.attention_s.size(),
                 "{}: cost table has {} layers but {} attention and {} MLP entries", what,
                 t.num_layers, t.attention_s.size(), t.mlp_s.size());
  SELFSPEC_CHECK(t.verify_ratio.size() >= 2,
                 "{}: cost table 'verify_ratio' needs at least 2 "
                 "entries",
                 what);
  SELFSPEC_CHECK(t.full_seconds() > 0.0, "{}: cost table gives a full forward no time", what);
  return t;
}

SublayerCostTable measure_cost_table(LlamaModel& model, const CostTableOptions& options) {
  const int layers = static_cast<int>(model.config().num_layers);
  SELFSPEC_CHECK(layers >= 3,
                 "the cost table needs at least 3 layers (the first and last always "
                 "run), this model has {}",
                 layers);
  SELFSPEC_CHECK(options.forwards >= 1 && options.rounds >= 1 && options.max_draft >= 1 &&
                     options.context >= 1,
                 "cost table options must be positive");
  KvCache kv = model.make_kv_cache(options.context + options.max_draft + 1);
  prefill_filler(model, kv, options.context);
  SublayerCostTable table;
  table.num_layers = layers;
  const BackendDescription where = model.backend().description();
  table.device = where.summary();
  table.threads = where.host_threads;
  table.tp = model.comm().size();
  table.context = options.context;
  table.forwards = options.forwards;
  table.rounds = options.rounds;

  const std::vector<TimedPlan> plans = timed_plans(layers);
  const LayerPlan full = LayerPlan::full(layers);
  const std::size_t n_plans = plans.size();
  // Samples per quantity, interleaved round by round so drift touches every plan alike:
  // [0, 4) the plans, 4 the head-less full forward, 5 + γ − 1 the verifications of γ = 1 … K.
  std::vector<std::vector<double>> samples(n_plans + 1 +
                                           static_cast<std::size_t>(options.max_draft));
  log::Progress progress("timing the sublayer cost table (rounds)", options.rounds);
  for (int round = 0; round < options.rounds; ++round) {
    for (std::size_t p = 0; p < n_plans; ++p) {
      samples[p].push_back(
          time_forward_batch(model, kv, plans[p].plan, options.context, 1, 1, options.forwards));
    }
    if (model.backend().host_memory()) {
      samples[n_plans].push_back(
          time_forward_batch(model, kv, full, options.context, 1, 0, options.forwards));
    }
    for (int g = 1; g <= options.max_draft; ++g) {
      samples[n_plans + static_cast<std::size_t>(g)].push_back(
          time_forward_batch(model, kv, full, options.context, g + 1, g + 1, options.forwards));
    }
    progress.update(round + 1);
  }
  progress.finish();
  std::vector<double> seconds;
  for (std::size_t p = 0; p < n_plans; ++p) seconds.push_back(median_of(samples[p]));
  fit_sublayers(plans, seconds, table);
  if (!samples[n_plans].empty()) {
    table.head_s = std::max(0.0, seconds[0] - median_of(samples[n_plans]));
  }
  table.verify_ratio.assign(1, 1.0);
  for (int g = 1; g <= options.max_draft; ++g) {
    table.verify_ratio.push_back(median_of(samples[n_plans + static_cast<std::size_t>(g)]) /
                                 seconds[0]);
  }
  return table;
}

}  // namespace selfspec
