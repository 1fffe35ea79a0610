// The expected speedup of a self-speculative draft from its per-token acceptance α and its cost,
// the objective of the skip-set search (SWIFT App. B.3 eq. 6; Draft & Verify §3.3 minimises the
// equivalent average time per verified token).
//
// SWIFT eq. 6: E(Spd.) = M / ((M − 1)·c/α + 1), with M the tokens per verification and c the draft
// forward's cost relative to the target's. With a fixed draft length γ and each draft token
// accepted with probability α given its prefix (greedy verification), a round emits
//   M(α, γ) = (1 − α^(γ+1)) / (1 − α)          (Leviathan et al. 2023, eq. 1)
// tokens and drafts γ tokens, so (M − 1)/α … becomes γ and eq. 6 reads M / (γ·c + 1). The "1" is
// the verification's cost in target forwards; a verification of γ + 1 tokens costs more than one
// decode step on hardware that is not purely bandwidth-bound (≈ 1.6 on our CPU backend at γ 8), so
// the objective uses the measured ratio v(γ) instead:
//   speedup(α, c, γ) = M(α, γ) / (γ·c + v(γ)),
// maximised over γ = 1 … max_draft. With v ≡ 1 this is eq. 6 exactly.
#pragma once

#include <span>

namespace selfspec {

struct SpeedupEstimate {
  int draft_length = 0;           // γ that maximises the estimate
  double tokens_per_round = 1.0;  // M(α, γ)
  double speedup = 1.0;           // M / (γ c + v(γ))
};

// M(α, γ); α in [0, 1], γ >= 0.
double tokens_per_round(double alpha, int draft_length);

// The best γ in [1, verify_cost.size() − 1] where verify_cost[γ] = v(γ), the cost of verifying γ
// drafts (γ + 1 tokens) in target decode forwards (verify_cost[0], plain decoding, is 1 by
// definition and unused). Throws selfspec::Error for α outside [0, 1], c <= 0, or fewer than two
// verify_cost entries.
SpeedupEstimate best_expected_speedup(double alpha, double draft_cost,
                                      std::span<const double> verify_cost);

// The same with v ≡ 1 (SWIFT eq. 6 as printed), for γ in [1, max_draft].
SpeedupEstimate best_expected_speedup_eq6(double alpha, double draft_cost, int max_draft);

}  // namespace selfspec
