// Draft on the Fly's Adaptive Draft Model Generator (ADMG, Metel et al., §3.2 and Algorithm 1):
// from the average cosine similarities C_1..C_L of the attention sublayers over the prompt
// (draft/attention_cosine.hpp), with the paper's 1-based layer numbers l = 1..L,
//   remove_ATTN = {l : C_l ≥ α, l ≤ L − n}            (CS thresholding)
//   remove_MLP  = {l : l = j·m for some j ∈ ℕ, l ≤ L − n}  (rule 1: every m-th layer; rule 2:
//                                                        never the last n layers)
//   remove_ATTN = remove_ATTN ∪ remove_MLP             (rule 1 removes whole layers)
// Table 2's defaults: α = 0.985, m = 3, n = 2 (CodeLlama-13B used m = 4, n = 3).
// In 0-based layer indices i = l − 1: rule 1 removes layers 2, 5, 8, ... for m = 3, and the
// last n layers i ≥ L − n keep both sublayers.
#pragma once

#include "draft/skip_set.hpp"

#include <span>

namespace selfspec {

struct AsdParams {
  double alpha = 0.985;  // CS threshold α ∈ (0, 1)
  int m = 3;             // rule 1: remove every m-th layer (m ≥ 1)
  int n = 2;             // rule 2: keep the last n layers (0 ≤ n ≤ L)

  // Throws selfspec::Error naming the option (--asd-alpha, --asd-m, --asd-n) and the value when a
  // parameter is outside its range; `num_layers` bounds n (0: not checked).
  void validate(int num_layers = 0) const;
};

// Algorithm 1 on `acs` (C_l for the 0-based layers 0..L-1). The set is named "asd", its source
// says α, m and n, and num_layers = L. Throws selfspec::Error when the parameters are invalid
// for L layers.
SkipSet adaptive_draft_skip_set(std::span<const double> acs, const AsdParams& params);

}  // namespace selfspec
