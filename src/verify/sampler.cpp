#include "verify/sampler.hpp"

#include "core/error.hpp"

#include <boost/random/uniform_01.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace selfspec {
namespace {

// A -inf logit (an id outside a pruned draft vocabulary) has probability 0 at any temperature.
bool is_impossible(float logit) {
  return logit == -std::numeric_limits<float>::infinity();
}

}  // namespace

void SamplingParams::validate() const {
  SELFSPEC_CHECK(std::isfinite(temperature) && temperature >= 0.0,
                 "--temperature must be a finite number >= 0 (got {})", temperature);
  SELFSPEC_CHECK(top_k >= 0, "--top-k must be >= 0 (got {})", top_k);
  SELFSPEC_CHECK(top_p > 0.0 && top_p <= 1.0, "--top-p must be in (0, 1] (got {})", top_p);
}

double TokenDistribution::prob_of(std::int32_t id) const {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == id) return probs[i];
  }
  return 0.0;
}

std::int32_t argmax(std::span<const float> logits) {
  std::int64_t best = -1;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[static_cast<std::size_t>(best)]) {
      best = static_cast<std::int64_t>(i);
    }
  }
  SELFSPEC_CHECK(best >= 0, "argmax: no valid logit among {}", logits.size());
  return static_cast<std::int32_t>(best);
}

std::vector<std::int32_t> top_k_candidates(std::span<const float> logits, std::int64_t vocab_begin,
                                           std::int32_t k) {
  std::vector<std::int32_t> local;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (!is_impossible(logits[i])) local.push_back(static_cast<std::int32_t>(i));
  }
  if (k > 0 && static_cast<std::size_t>(k) < local.size()) {
    const auto by_logit = [&](std::int32_t a, std::int32_t b) {
      const float la = logits[static_cast<std::size_t>(a)];
      const float lb = logits[static_cast<std::size_t>(b)];
      return la > lb || (la == lb && a < b);
    };
    const auto kk = static_cast<std::size_t>(k);
    std::vector<std::int32_t> order = local;
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kk - 1),
                     order.end(), by_logit);
    const float threshold = logits[static_cast<std::size_t>(order[kk - 1])];
    std::erase_if(local, [&](std::int32_t i) {
      const float logit = logits[static_cast<std::size_t>(i)];
      return !(logit > threshold || logit == threshold);
    });
  }
  for (auto& id : local) id = static_cast<std::int32_t>(id + vocab_begin);
  return local;
}

TokenDistribution warp_candidates(std::vector<std::int32_t> ids, std::span<const float> logits,
                                  const SamplingParams& params) {
  SELFSPEC_CHECK(!params.greedy(), "warping needs a temperature > 0");
  SELFSPEC_CHECK(ids.size() == logits.size() && !ids.empty(),
                 "warp: {} candidate ids but {} logits", ids.size(), logits.size());
  // Candidate positions without the impossible ones (they have probability 0 under every warp),
  // sorted by logit, highest first; ties by lower id (deterministic).
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!is_impossible(logits[i])) order.push_back(i);
  }
  SELFSPEC_CHECK(!order.empty(), "warp: every one of the {} candidate logits is -inf", ids.size());
  const auto by_logit = [&](std::size_t a, std::size_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && ids[a] < ids[b]);
  };
  std::size_t keep = order.size();
  if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < order.size()) {
    const auto k = static_cast<std::size_t>(params.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      by_logit);
    // Keep every token whose logit equals the k-th largest (HF: remove logits < k-th value).
    const float threshold = logits[order[k - 1]];
    std::vector<std::size_t> tied;
    for (std::size_t i = k; i < order.size(); ++i) {
      if (logits[order[i]] == threshold) tied.push_back(order[i]);
    }
    std::sort(tied.begin(), tied.end(), by_logit);
    std::copy(tied.begin(), tied.end(), order.begin() + static_cast<std::ptrdiff_t>(k));
    keep = k + tied.size();
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  order.resize(keep);

  // Softmax over the survivors in double, in sorted order.
  TokenDistribution dist;
  dist.ids.resize(order.size());
  dist.probs.resize(order.size());
  const double max_scaled = static_cast<double>(logits[order.front()]) / params.temperature;
  double sum = 0.0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    dist.ids[i] = ids[order[i]];
    dist.probs[i] =
        std::exp(static_cast<double>(logits[order[i]]) / params.temperature - max_scaled);
    sum += dist.probs[i];
  }
  for (double& p : dist.probs) p /= sum;

  if (params.top_p < 1.0) {
    // HF TopPLogitsWarper: ascending cumulative sum; remove while cumsum <= 1 - top_p; keep >= 1.
    double cumulative = 0.0;
    std::size_t removed = 0;
    const std::size_t n = dist.probs.size();
    for (std::size_t i = n; i-- > 1;) {
      cumulative += dist.probs[i];
      if (cumulative > 1.0 - params.top_p) break;
      ++removed;
    }
    if (removed > 0) {
      dist.ids.resize(n - removed);
      dist.probs.resize(n - removed);
      const double kept = std::accumulate(dist.probs.begin(), dist.probs.end(), 0.0);
      for (double& p : dist.probs) p /= kept;
    }
  }
  return dist;
}

TokenDistribution warp_logits(std::span<const float> logits, const SamplingParams& params) {
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  return warp_candidates(std::move(ids), logits, params);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  params_.validate();
}

double Sampler::uniform() {
  boost::random::uniform_01<double> draw;
  return draw(rng_);
}

std::int32_t draw_from(const TokenDistribution& distribution, double u) {
  SELFSPEC_CHECK(!distribution.ids.empty(), "sampling from an empty distribution");
  double cumulative = 0.0;
  for (std::size_t i = 0; i < distribution.ids.size(); ++i) {
    cumulative += distribution.probs[i];
    if (u < cumulative) return distribution.ids[i];
  }
  return distribution.ids.back();  // u within rounding of 1
}

std::int32_t Sampler::sample_from(const TokenDistribution& distribution) {
  return draw_from(distribution, uniform());
}

std::int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.greedy()) return argmax(logits);
  return sample_from(warp_logits(logits, params_));
}

}  // namespace selfspec
