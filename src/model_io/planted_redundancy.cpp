#include "model_io/planted_redundancy.hpp"

#include "core/error.hpp"

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace selfspec {

PlantedRedundancy plant_redundancy(int num_layers, double fraction, std::uint64_t seed) {
  SELFSPEC_CHECK(num_layers >= 3, "planted redundancy needs at least 3 layers (got {})",
                 num_layers);
  SELFSPEC_CHECK(fraction >= 0.0 && fraction < 1.0,
                 "--redundant-fraction must be in [0, 1) (got {})", fraction);
  PlantedRedundancy planted;
  planted.attention_scale.assign(static_cast<std::size_t>(num_layers), 1.0);
  planted.mlp_scale.assign(static_cast<std::size_t>(num_layers), 1.0);
  // Candidates: both sublayers of layers 1..L-2 (the first and last layers stay important).
  std::vector<int> candidates;  // 2l = attention l, 2l + 1 = MLP l
  for (int l = 1; l < num_layers - 1; ++l) {
    candidates.push_back(2 * l);
    candidates.push_back(2 * l + 1);
  }
  const auto wanted = std::min<std::size_t>(
      candidates.size(), static_cast<std::size_t>(std::lround(fraction * 2.0 * num_layers)));
  // Seeded Fisher–Yates shuffle (Boost.Random: the same order on every platform).
  boost::random::mt19937_64 rng(seed ^ 0x706c616e746564ull);
  for (std::size_t i = candidates.size(); i > 1; --i) {
    boost::random::uniform_int_distribution<std::size_t> pick(0, i - 1);
    std::swap(candidates[i - 1], candidates[pick(rng)]);
  }
  for (std::size_t i = 0; i < wanted; ++i) {
    // Graded: geometric from the weakest to the weakest "still redundant" scale.
    const double t = wanted > 1 ? static_cast<double>(i) / static_cast<double>(wanted - 1) : 0.0;
    const double scale =
        PlantedRedundancy::kWeakest *
        std::pow(PlantedRedundancy::kWeakestImportant / PlantedRedundancy::kWeakest, t);
    const int sublayer = candidates[i];
    const auto layer = static_cast<std::size_t>(sublayer / 2);
    if (sublayer % 2 == 0) {
      planted.attention_scale[layer] = scale;
      planted.redundant_attention.push_back(sublayer / 2);
    } else {
      planted.mlp_scale[layer] = scale;
      planted.redundant_mlp.push_back(sublayer / 2);
    }
  }
  std::sort(planted.redundant_attention.begin(), planted.redundant_attention.end());
  std::sort(planted.redundant_mlp.begin(), planted.redundant_mlp.end());
  return planted;
}

void apply_planted_redundancy(const PlantedRedundancy& planted, double lm_head_scale,
                              SyntheticModelSpec& spec) {
  spec.attention_scale = planted.attention_scale;
  spec.mlp_scale = planted.mlp_scale;
  spec.lm_head_scale = lm_head_scale;
}

void write_planted_redundancy_files(const PlantedRedundancy& planted, int num_layers,
                                    const std::filesystem::path& dir) {
  const nlohmann::json record = {
      {"preset", "planted-redundancy"},
      {"note",
       "synthetic checkpoint: output projections of the listed sublayers are scaled "
       "towards zero (planted redundancy); the weights carry no knowledge"},
      {"attention_output_scale", planted.attention_scale},
      {"mlp_output_scale", planted.mlp_scale},
      {"redundant_attention", planted.redundant_attention},
      {"redundant_mlp", planted.redundant_mlp}};
  std::ofstream(dir / "planted_redundancy.json") << record.dump(2) << "\n";
  const nlohmann::json skips = {
      {"name", "planted"},
      {"source", "selfspec make-model --preset planted-redundancy: the planted-weak sublayers"},
      {"num_layers", num_layers},
      {"attention", planted.redundant_attention},
      {"mlp", planted.redundant_mlp}};
  std::ofstream out(dir / "skips.json");
  SELFSPEC_CHECK(out.good(), "cannot write {}", (dir / "skips.json").string());
  out << skips.dump(2) << "\n";
}

}  // namespace selfspec
