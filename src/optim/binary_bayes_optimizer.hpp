// Bayesian optimisation over binary masks: the search engine of Draft & Verify's skip-set
// selection (§3.3, Fig. 3: "it iteratively selects new inputs z* for evaluation, based on a
// surrogate model of the objective function, i.e. Gaussian process, and an acquisition function")
// and of SWIFT's Bayesian steps (§4.1). It maximises a black-box f: {0,1}^D → R.
//
// propose(history) returns the next mask to evaluate and depends only on the options and the
// history (its random stream is seeded from (seed, history size)), so an interrupted search that
// reloads its history continues exactly as an uninterrupted one would:
//   1. the caller's initial design (e.g. uniform skip sets), in order;
//   2. random masks until `initial_random` random points have been tried, each with a skip count
//      drawn uniformly from [min_ones, max_ones];
//   3. then (every proposal, or with bayes_every = k every k-th one and random masks between, as
//      SWIFT §4.1 alternates random search with a Bayesian step every β) a Gaussian process
//      (gaussian_process.hpp) on every observation, and the candidate with the best acquisition —
//      UCB μ + κσ or expected improvement over the best value (Jones et al. 1998) — among a pool of
//      fresh random masks and local moves (flip one to three bits, or swap a set and a clear bit)
//      around the best observations. Masks already evaluated are never proposed again; a mask
//      outside [min_ones, max_ones] never.
// The acquisition is maximised over a sampled pool rather than by gradient steps because the
// domain is discrete.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

using BinaryMask = std::vector<std::uint8_t>;  // D entries, each 0 or 1

struct MaskObservation {
  BinaryMask mask;
  double value = 0.0;  // f(mask), to be maximised
};

enum class Acquisition { kUcb, kExpectedImprovement };
Acquisition parse_acquisition(std::string_view name);  // "ucb" | "ei"; throws otherwise
std::string_view acquisition_name(Acquisition acquisition);

struct BinaryBayesOptions {
  int dims = 0;
  int min_ones = 0;  // masks proposed set at least this many bits …
  int max_ones = 0;  // … and at most this many
  std::vector<BinaryMask> initial_design;
  int initial_random = 8;
  int bayes_every = 1;  // after the random phase, every k-th proposal is Bayesian, others random
  double noise = 1e-6;  // the GP's noise variance (standardised units): small for a deterministic
                        // objective, larger for a noisy one (SWIFT scores on a moving window)
  Acquisition acquisition = Acquisition::kUcb;
  double ucb_kappa = 2.0;  // UCB's exploration weight
  double ei_xi = 0.01;     // EI's improvement margin, in the objective's units
  int pool_random = 1024;  // fresh random masks per proposal
  int pool_local = 1024;   // local moves around the best observations per proposal
  int local_parents = 5;   // how many of the best observations seed local moves
  std::uint64_t seed = 0;
};

class BinaryBayesOptimizer {
 public:
  // Throws selfspec::Error naming the field for dims < 1, a bad ones range or an initial design
  // mask of the wrong length or outside the ones range.
  explicit BinaryBayesOptimizer(BinaryBayesOptions options);

  // The next mask to evaluate (never one in `history`). Throws when every mask in range has been
  // evaluated (only possible for tiny D).
  BinaryMask propose(std::span<const MaskObservation> history) const;

  // Which phase the proposal for a history of this size comes from: "initial", "random", "bo".
  std::string_view phase(std::size_t history_size) const;

  const BinaryBayesOptions& options() const { return options_; }

 private:
  BinaryMask random_mask(std::mt19937_64& rng) const;
  BinaryMask local_move(const BinaryMask& parent, std::mt19937_64& rng) const;
  BinaryMask bayesian_step(std::span<const MaskObservation> history, std::mt19937_64& rng) const;

  BinaryBayesOptions options_;
};

// A mask with exactly `ones` bits set among `dims`, uniformly at random.
BinaryMask random_mask_with_ones(int dims, int ones, std::mt19937_64& rng);
int count_ones(const BinaryMask& mask);

}  // namespace selfspec
