#include "backend/logit_statistics.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace selfspec {

double RowStats::probability(double scaled_logit) const {
  return std::exp(scaled_logit - max) / sum_exp;
}

ShardStats shard_stats(std::span<const float> logits, std::int64_t vocab_begin,
                       double inv_temperature, RowNeeds needs) {
  ShardStats stats;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double scaled = static_cast<double>(logits[i]) * inv_temperature;
    if (scaled > stats.max) {
      stats.max = scaled;
      stats.argmax = static_cast<std::int32_t>(vocab_begin + static_cast<std::int64_t>(i));
    }
  }
  if (stats.argmax < 0 || needs == RowNeeds::kArgmax) return stats;  // empty: NaN / -inf only
  constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();
  for (float logit : logits) {
    if (logit == kMinusInfinity) continue;  // exp(-inf) = +0: the sum is unchanged
    const double scaled = static_cast<double>(logit) * inv_temperature;
    if (!std::isnan(scaled)) stats.sum_exp += std::exp(scaled - stats.max);
  }
  return stats;
}

RowStats combine_shards(std::span<const ShardStats> shards) {
  RowStats row;
  for (const ShardStats& s : shards) {
    if (s.argmax >= 0 && s.max > row.max) {
      row.max = s.max;
      row.argmax = s.argmax;
    }
  }
  SELFSPEC_CHECK(row.argmax >= 0, "no finite logit in any of the {} vocabulary shards",
                 shards.size());
  row.shard_mass.resize(shards.size());
  row.shard_max.resize(shards.size());
  for (std::size_t s = 0; s < shards.size(); ++s) {
    row.shard_max[s] = shards[s].max;
    row.shard_mass[s] =
        shards[s].argmax < 0 ? 0.0 : shards[s].sum_exp * std::exp(shards[s].max - row.max);
    row.sum_exp += row.shard_mass[s];
  }
  return row;
}

ShardPick pick_shard(std::span<const double> masses, double target) {
  double cumulative = 0.0;
  int last_nonempty = -1;
  for (std::size_t s = 0; s < masses.size(); ++s) {
    if (masses[s] <= 0.0) continue;
    last_nonempty = static_cast<int>(s);
    if (target < cumulative + masses[s]) return {static_cast<int>(s), target - cumulative};
    cumulative += masses[s];
  }
  SELFSPEC_CHECK(last_nonempty >= 0, "sampling from a distribution with no mass");
  const auto s = static_cast<std::size_t>(last_nonempty);
  return {last_nonempty, masses[s]};  // rounding: the end of the last non-empty shard
}

std::int32_t walk_softmax(std::span<const float> logits, std::int64_t vocab_begin,
                          double inv_temperature, double shard_max, double target) {
  double cumulative = 0.0;
  std::int64_t last_positive = -1;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double scaled = static_cast<double>(logits[i]) * inv_temperature;
    if (std::isnan(scaled)) continue;
    const double weight = std::exp(scaled - shard_max);
    if (weight <= 0.0) continue;
    last_positive = static_cast<std::int64_t>(i);
    cumulative += weight;
    if (target < cumulative)
      return static_cast<std::int32_t>(vocab_begin + static_cast<std::int64_t>(i));
  }
  SELFSPEC_CHECK(last_positive >= 0, "sampling walk over a shard without mass");
  return static_cast<std::int32_t>(vocab_begin + last_positive);
}

namespace {
double residual_weight(float p_logit, float q_logit, const DensePair& pair) {
  const double p =
      std::exp(static_cast<double>(p_logit) * pair.inv_temperature - pair.p_max) / pair.p_sum;
  const double q =
      std::exp(static_cast<double>(q_logit) * pair.inv_temperature - pair.q_max) / pair.q_sum;
  return p > q ? p - q : 0.0;  // NaN logits give no weight
}
}  // namespace

double residual_mass(std::span<const float> p_logits, std::span<const float> q_logits,
                     const DensePair& pair) {
  double mass = 0.0;
  for (std::size_t i = 0; i < p_logits.size(); ++i)
    mass += residual_weight(p_logits[i], q_logits[i], pair);
  return mass;
}

std::int32_t walk_residual(std::span<const float> p_logits, std::span<const float> q_logits,
                           std::int64_t vocab_begin, const DensePair& pair, double target) {
  double cumulative = 0.0;
  std::int64_t last_positive = -1;
  for (std::size_t i = 0; i < p_logits.size(); ++i) {
    const double weight = residual_weight(p_logits[i], q_logits[i], pair);
    if (weight <= 0.0) continue;
    last_positive = static_cast<std::int64_t>(i);
    cumulative += weight;
    if (target < cumulative)
      return static_cast<std::int32_t>(vocab_begin + static_cast<std::int64_t>(i));
  }
  SELFSPEC_CHECK(last_positive >= 0, "residual walk over a shard without mass");
  return static_cast<std::int32_t>(vocab_begin + last_positive);
}

}  // namespace selfspec
