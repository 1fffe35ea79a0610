// A scripted oracle drafter for closed-loop controller tests: no model, only the statistics that
// matter to a draft-length controller. Each drafted token gets a confidence c ~ Beta(k, 1) and is
// "correct" (the target agrees) with probability exactly c — a perfectly calibrated draft whose
// higher-confidence tokens are more likely to be accepted. The overall per-token agreement is
// a = E[c] = k / (k + 1), independently from token to token.
//
// run_round() plays one speculative round: draft until the controller stops or K tokens are out,
// then verify: the accepted count is the longest correct prefix (greedy verification).
#pragma once

#include "control/draft_length_controller.hpp"

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/beta_distribution.hpp>
#include <boost/random/mersenne_twister.hpp>

#include <cstdint>

namespace selfspec::testing {

struct DraftedToken {
  double confidence;
  bool correct;
};

class OracleDrafter {
 public:
  OracleDrafter(double confidence_shape, std::uint64_t seed)
      : confidence_(confidence_shape, 1.0), rng_(seed) {}

  // For a drafter with per-token agreement a: k = a / (1 − a).
  static double shape_for_agreement(double agreement) { return agreement / (1.0 - agreement); }

  double agreement() const {
    const double k = confidence_.alpha();
    return k / (k + 1.0);
  }

  DraftedToken draft() {
    const double c = confidence_(rng_);
    const bool correct = boost::random::bernoulli_distribution<double>(c)(rng_);
    return {c, correct};
  }

 private:
  boost::random::beta_distribution<double> confidence_;
  boost::random::mt19937_64 rng_;
};

struct RoundResult {
  int drafted = 0;
  int accepted = 0;
};

inline RoundResult run_round(DraftLengthController& controller, OracleDrafter& drafter) {
  RoundResult result;
  bool prefix_correct = true;
  controller.begin_round();
  while (true) {
    const DraftedToken token = drafter.draft();
    ++result.drafted;
    prefix_correct = prefix_correct && token.correct;
    if (prefix_correct) ++result.accepted;
    if (result.drafted >= controller.max_draft()) break;
    if (!controller.continue_drafting(result.drafted, token.confidence)) break;
  }
  controller.update(result.drafted, result.accepted);
  return result;
}

}  // namespace selfspec::testing
