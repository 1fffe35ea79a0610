// Bayesian optimisation over binary masks: see binary_bayes_optimizer.hpp.
#include "optim/binary_bayes_optimizer.hpp"

#include "core/error.hpp"
#include "optim/gaussian_process.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace selfspec {

namespace {

// SplitMix64 finaliser: decorrelates the per-proposal seeds (seed, seed+1, ...).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Eigen::VectorXd to_vector(const BinaryMask& mask) {
  Eigen::VectorXd v(static_cast<Eigen::Index>(mask.size()));
  for (std::size_t i = 0; i < mask.size(); ++i) v(static_cast<Eigen::Index>(i)) = mask[i];
  return v;
}

// Set and map keys: the mask as a string (GCC 12 warns falsely on comparing byte vectors).
std::string key(const BinaryMask& mask) {
  return {mask.begin(), mask.end()};
}

std::set<std::string> evaluated(std::span<const MaskObservation> history) {
  std::set<std::string> seen;
  for (const MaskObservation& o : history) seen.insert(key(o.mask));
  return seen;
}

}  // namespace

Acquisition parse_acquisition(std::string_view name) {
  if (name == "ucb") return Acquisition::kUcb;
  if (name == "ei") return Acquisition::kExpectedImprovement;
  fail("unknown acquisition '{}' (expected ucb or ei)", name);
}

std::string_view acquisition_name(Acquisition acquisition) {
  return acquisition == Acquisition::kUcb ? "ucb" : "ei";
}

int count_ones(const BinaryMask& mask) {
  return static_cast<int>(std::count(mask.begin(), mask.end(), std::uint8_t{1}));
}

BinaryMask random_mask_with_ones(int dims, int ones, std::mt19937_64& rng) {
  SELFSPEC_CHECK(ones >= 0 && ones <= dims, "random_mask_with_ones: {} ones in {} dims", ones,
                 dims);
  std::vector<int> order(static_cast<std::size_t>(dims));
  std::iota(order.begin(), order.end(), 0);
  // Fisher–Yates with our own draws: std::shuffle's sequence is implementation-defined, and a
  // resumed search must draw the same masks on any standard library.
  for (int i = dims - 1; i > 0; --i) {
    const auto j = static_cast<int>(rng() % static_cast<std::uint64_t>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  BinaryMask mask(static_cast<std::size_t>(dims), 0);
  for (int k = 0; k < ones; ++k)
    mask[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = 1;
  return mask;
}

BinaryBayesOptimizer::BinaryBayesOptimizer(BinaryBayesOptions options)
    : options_(std::move(options)) {
  const BinaryBayesOptions& o = options_;
  SELFSPEC_CHECK(o.dims >= 1, "BinaryBayesOptions.dims = {} must be at least 1", o.dims);
  SELFSPEC_CHECK(o.min_ones >= 0 && o.min_ones <= o.max_ones && o.max_ones <= o.dims,
                 "BinaryBayesOptions: ones range [{}, {}] must lie within [0, dims = {}]",
                 o.min_ones, o.max_ones, o.dims);
  SELFSPEC_CHECK(o.initial_random >= 0, "BinaryBayesOptions.initial_random = {} must be >= 0",
                 o.initial_random);
  SELFSPEC_CHECK(o.pool_random + o.pool_local >= 1, "BinaryBayesOptions: empty candidate pool");
  SELFSPEC_CHECK(o.bayes_every >= 1, "BinaryBayesOptions.bayes_every = {} must be >= 1",
                 o.bayes_every);
  SELFSPEC_CHECK(o.noise > 0.0, "BinaryBayesOptions.noise = {} must be positive", o.noise);
  for (std::size_t i = 0; i < o.initial_design.size(); ++i) {
    const BinaryMask& m = o.initial_design[i];
    SELFSPEC_CHECK(static_cast<int>(m.size()) == o.dims,
                   "BinaryBayesOptions.initial_design[{}] has {} entries, expected {}", i, m.size(),
                   o.dims);
    const int ones = count_ones(m);
    SELFSPEC_CHECK(ones >= o.min_ones && ones <= o.max_ones,
                   "BinaryBayesOptions.initial_design[{}] sets {} bits, outside [{}, {}]", i, ones,
                   o.min_ones, o.max_ones);
  }
}

std::string_view BinaryBayesOptimizer::phase(std::size_t history_size) const {
  const std::size_t design = options_.initial_design.size();
  if (history_size < design) return "initial";
  const std::size_t start = design + static_cast<std::size_t>(options_.initial_random);
  if (history_size < start) return "random";
  const auto every = static_cast<std::size_t>(options_.bayes_every);
  return (history_size - start) % every == every - 1 ? "bo" : "random";
}

BinaryMask BinaryBayesOptimizer::random_mask(std::mt19937_64& rng) const {
  const int span = options_.max_ones - options_.min_ones + 1;
  const int ones = options_.min_ones + static_cast<int>(rng() % static_cast<std::uint64_t>(span));
  return random_mask_with_ones(options_.dims, ones, rng);
}

BinaryMask BinaryBayesOptimizer::local_move(const BinaryMask& parent, std::mt19937_64& rng) const {
  BinaryMask mask = parent;
  const auto dims = static_cast<std::uint64_t>(options_.dims);
  if (rng() % 2 == 0) {  // swap a set bit with a clear one: same skip count
    std::vector<std::size_t> set, clear;
    for (std::size_t i = 0; i < mask.size(); ++i) (mask[i] ? set : clear).push_back(i);
    if (!set.empty() && !clear.empty()) {
      std::swap(mask[set[rng() % set.size()]], mask[clear[rng() % clear.size()]]);
      return mask;
    }
  }
  const int flips = 1 + static_cast<int>(rng() % 3);
  for (int f = 0; f < flips; ++f) {
    const std::size_t i = rng() % dims;
    mask[i] = static_cast<std::uint8_t>(1 - mask[i]);
  }
  return mask;
}

BinaryMask BinaryBayesOptimizer::bayesian_step(std::span<const MaskObservation> history,
                                               std::mt19937_64& rng) const {
  const BinaryBayesOptions& o = options_;
  Eigen::MatrixXd inputs(static_cast<Eigen::Index>(history.size()), o.dims);
  std::vector<double> values;
  for (std::size_t i = 0; i < history.size(); ++i) {
    inputs.row(static_cast<Eigen::Index>(i)) = to_vector(history[i].mask).transpose();
    values.push_back(history[i].value);
  }
  GaussianProcess gp(o.noise);
  gp.fit(inputs, values);
  const double best_value = *std::max_element(values.begin(), values.end());

  // Parents of local moves: the best observations, ties broken by history order.
  std::vector<std::size_t> order(history.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return history[a].value > history[b].value;
  });
  const std::size_t parents =
      std::min<std::size_t>(order.size(), static_cast<std::size_t>(std::max(1, o.local_parents)));

  const std::set<std::string> seen = evaluated(history);
  std::map<std::string, BinaryMask> pool;
  const auto add = [&pool](BinaryMask mask) { pool.emplace(key(mask), std::move(mask)); };
  for (int i = 0; i < o.pool_random; ++i) add(random_mask(rng));
  for (int i = 0; i < o.pool_local; ++i) {
    add(local_move(history[order[static_cast<std::size_t>(i) % parents]].mask, rng));
  }

  const BinaryMask* best = nullptr;
  double best_score = -std::numeric_limits<double>::infinity();
  for (const auto& [candidate_key, candidate] : pool) {  // ordered: ties resolve alike every run
    const int ones = count_ones(candidate);
    if (ones < o.min_ones || ones > o.max_ones || seen.contains(candidate_key)) continue;
    const GpPrediction p = gp.predict(to_vector(candidate));
    double score = 0.0;
    if (o.acquisition == Acquisition::kUcb) {
      score = p.mean + o.ucb_kappa * p.stddev;
    } else {
      const double gain = p.mean - best_value - o.ei_xi;
      score = p.stddev > 0.0
                  ? gain * normal_cdf(gain / p.stddev) + p.stddev * normal_pdf(gain / p.stddev)
                  : std::max(0.0, gain);
    }
    if (score > best_score) {
      best_score = score;
      best = &candidate;
    }
  }
  SELFSPEC_CHECK(best != nullptr, "Bayesian optimisation: every candidate mask has been evaluated");
  return *best;
}

BinaryMask BinaryBayesOptimizer::propose(std::span<const MaskObservation> history) const {
  std::mt19937_64 rng(mix(options_.seed ^ mix(history.size())));
  const std::string_view now = phase(history.size());
  if (now == "initial") return options_.initial_design[history.size()];
  const std::set<std::string> seen = evaluated(history);
  if (now == "random" || history.empty()) {
    for (int attempt = 0; attempt < 1000; ++attempt) {
      BinaryMask mask = random_mask(rng);
      if (!seen.contains(key(mask))) return mask;
    }
    // Nearly every mask in range is taken: the Bayesian step's local moves find the rest.
  }
  SELFSPEC_CHECK(!history.empty(), "Bayesian optimisation: no random mask in range found");
  return bayesian_step(history, rng);
}

}  // namespace selfspec
