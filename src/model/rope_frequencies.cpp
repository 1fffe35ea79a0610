#include "model/rope_frequencies.hpp"

#include <cmath>
#include <numbers>

namespace selfspec {

std::vector<float> rope_inverse_frequencies(const ModelConfig& config) {
  const std::int64_t dim = config.head_dim;
  std::vector<float> inv_freq(static_cast<std::size_t>(dim / 2));
  const RopeScaling& scaling = config.rope_scaling;
  for (std::int64_t i = 0; i < dim / 2; ++i) {
    double freq =
        1.0 / std::pow(config.rope_theta, static_cast<double>(2 * i) / static_cast<double>(dim));
    switch (scaling.type) {
      case RopeScalingType::kNone:
        break;
      case RopeScalingType::kLinear:
        freq /= scaling.factor;
        break;
      case RopeScalingType::kLlama3: {
        const double old_context = static_cast<double>(scaling.original_max_position_embeddings);
        const double low_freq_wavelen = old_context / scaling.low_freq_factor;
        const double high_freq_wavelen = old_context / scaling.high_freq_factor;
        const double wavelen = 2.0 * std::numbers::pi / freq;
        if (wavelen > low_freq_wavelen) {
          freq /= scaling.factor;  // low frequency: fully scaled
        } else if (wavelen >= high_freq_wavelen) {
          // medium frequency: blend between scaled and unscaled
          const double smooth = (old_context / wavelen - scaling.low_freq_factor) /
                                (scaling.high_freq_factor - scaling.low_freq_factor);
          freq = (1.0 - smooth) * freq / scaling.factor + smooth * freq;
        }
        break;
      }
    }
    inv_freq[static_cast<std::size_t>(i)] = static_cast<float>(freq);
  }
  return inv_freq;
}

}  // namespace selfspec
