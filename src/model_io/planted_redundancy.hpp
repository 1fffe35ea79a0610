// The "planted-redundancy" synthetic checkpoint: a demo where layer skipping makes sense. Random
// weights give meaningless acceptance (every sublayer matters equally and the next-token
// distribution is flat), so this preset plants structure on purpose:
//   * graded redundancy — a seeded choice of `fraction` of the 2L sublayers (never in the first or
//     last layer) gets its output projection (o_proj / down_proj) scaled towards zero, by factors
//     spread geometrically from kWeakest to kWeakestImportant: those sublayers barely move the
//     residual stream and a draft can skip them; the others keep their full scale and matter;
//   * a peaked next-token distribution — the LM head is scaled up so the top token usually
//     dominates, as in a trained model's confident continuations.
// The checkpoint is synthetic: it has no knowledge, its text is meaningless; only its structure
// is realistic enough to measure the machinery (acceptance, speedup) of self-speculative decoding.
#pragma once

#include "model_io/synthetic_model.hpp"

#include <cstdint>
#include <filesystem>
#include <vector>

namespace selfspec {

struct PlantedRedundancy {
  static constexpr double kWeakest = 0.002;
  static constexpr double kWeakestImportant = 0.05;
  std::vector<double> attention_scale;  // per layer
  std::vector<double> mlp_scale;
  std::vector<int> redundant_attention;  // the planted-weak sublayers, sorted
  std::vector<int> redundant_mlp;
};

// Chooses round(fraction · 2L) weak sublayers among layers 1..L-2 (seeded) and their scales.
PlantedRedundancy plant_redundancy(int num_layers, double fraction, std::uint64_t seed);

// Applies the scales (and the LM-head scale) to a synthetic-model spec.
void apply_planted_redundancy(const PlantedRedundancy& planted, double lm_head_scale,
                              SyntheticModelSpec& spec);

// Writes <dir>/planted_redundancy.json (the per-layer scales, for the record) and
// <dir>/skips.json (the skip set of exactly the planted-weak sublayers, usable with
// `--skip-config`).
void write_planted_redundancy_files(const PlantedRedundancy& planted, int num_layers,
                                    const std::filesystem::path& dir);

}  // namespace selfspec
