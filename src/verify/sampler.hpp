// Rank-0 token selection from full-vocabulary logits.
//   greedy (temperature 0): the first index of the maximum logit;
//   sampling: HuggingFace's logits-warper order — temperature, then top-k (ties with the k-th
//   value are kept), then top-p (nucleus: drop the lowest-probability tokens whose cumulative
//   probability stays <= 1 - top_p, always keeping the most likely) — softmax in double, and an
//   inverse-CDF draw with a seeded Boost.Random mt19937_64 (reproducible across platforms).
// The warped distribution is exposed so speculative sampling can apply the identical warping to
// the target (p) and the draft (q).
#pragma once

#include <boost/random/mersenne_twister.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace selfspec {

struct SamplingParams {
  double temperature = 0.0;  // <= 0: greedy
  std::int32_t top_k = 0;    // 0: off
  double top_p = 1.0;        // 1: off
  std::uint64_t seed = 0;
  bool greedy() const { return temperature <= 0.0; }
  // Throws selfspec::Error naming the option when a value is out of range.
  void validate() const;
};

// A distribution over the tokens that survive warping, most likely first; probabilities sum to 1.
struct TokenDistribution {
  std::vector<std::int32_t> ids;
  std::vector<double> probs;
  // Probability of a token (0 when it was filtered out). Linear in the support size.
  double prob_of(std::int32_t id) const;
};

// The first index of the maximum (NaN logits never win).
std::int32_t argmax(std::span<const float> logits);

// Temperature, top-k, top-p, softmax. Requires !params.greedy(). Ids with a -inf logit are left
// out of the distribution (probability 0); at least one logit must be finite.
TokenDistribution warp_logits(std::span<const float> logits, const SamplingParams& params);

// The same warping over a candidate subset of the vocabulary (ids with their logits). Gives the
// identical distribution as warp_logits over the full row whenever the candidates include every
// token that survives top-k (e.g. each vocab shard's own top-k, ties included): the survivors are
// sorted the same way (logit descending, id ascending) and normalised in that order.
TokenDistribution warp_candidates(std::vector<std::int32_t> ids, std::span<const float> logits,
                                  const SamplingParams& params);

// The ids of a logit row that can survive top-k: its k largest (logit descending, id ascending)
// plus every id tied with the k-th. `vocab_begin` is the id of logits[0]. All ids when k == 0.
// Ids whose logit is -inf are never candidates (probability 0 under any warp; a pruned draft
// vocabulary gives every id outside it -inf), so a row of only -inf has none.
std::vector<std::int32_t> top_k_candidates(std::span<const float> logits, std::int64_t vocab_begin,
                                           std::int32_t k);

// The inverse-CDF draw at u ∈ [0, 1) over the distribution's order (most likely first).
std::int32_t draw_from(const TokenDistribution& distribution, double u);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  const SamplingParams& params() const { return params_; }
  // Greedy or sampled token for one position's logits.
  std::int32_t sample(std::span<const float> logits);
  // A draw from a warped distribution.
  std::int32_t sample_from(const TokenDistribution& distribution);
  // A uniform draw in [0, 1) from the same stream (speculative acceptance tests).
  double uniform();

 private:
  SamplingParams params_;
  boost::random::mt19937_64 rng_;
};

}  // namespace selfspec
