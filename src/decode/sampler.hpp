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
  // Probability of a token (0 when it was filtered out).
  double prob_of(std::int32_t id) const;
};

// The first index of the maximum (NaN logits never win).
std::int32_t argmax(std::span<const float> logits);

// Temperature, top-k, top-p, softmax. Requires !params.greedy().
TokenDistribution warp_logits(std::span<const float> logits, const SamplingParams& params);

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
