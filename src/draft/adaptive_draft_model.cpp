#include "draft/adaptive_draft_model.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

namespace selfspec {

void AsdParams::validate(int num_layers) const {
  SELFSPEC_CHECK(alpha > 0.0 && alpha < 1.0,
                 "--asd-alpha (the cosine threshold α) must lie in (0, 1), got {}", alpha);
  SELFSPEC_CHECK(m >= 1, "--asd-m (remove every m-th layer) must be >= 1, got {}", m);
  SELFSPEC_CHECK(n >= 0, "--asd-n (keep the last n layers) must be >= 0, got {}", n);
  SELFSPEC_CHECK(num_layers <= 0 || n <= num_layers,
                 "--asd-n (keep the last n layers) is {} but the model has only {} layers", n,
                 num_layers);
}

SkipSet adaptive_draft_skip_set(std::span<const double> acs, const AsdParams& params) {
  const int layers = static_cast<int>(acs.size());
  params.validate(layers);
  SkipSet skips;
  skips.name = "asd";
  skips.source = fmt::format("Draft on the Fly Alg. 1 (alpha {}, m {}, n {})", params.alpha,
                             params.m, params.n);
  skips.num_layers = layers;
  for (int i = 0; i < layers - params.n; ++i) {  // rule 2: 1-based l = i + 1 <= L - n
    const bool rule1 = (i + 1) % params.m == 0;  // l = j·m
    const bool threshold = acs[static_cast<std::size_t>(i)] >= params.alpha;
    if (rule1 || threshold) skips.attention.push_back(i);
    if (rule1) skips.mlp.push_back(i);
  }
  return skips;
}

}  // namespace selfspec
