// Skip sets: which attention and MLP sublayers a layer-skip draft leaves out (Draft & Verify §3.1:
// the draft is the model with a subset of its 2L sublayers bypassed). Sources:
//   * a YAML or JSON file — `{attention: [3, 5], mlp: [6]}` with 0-based layer indices, optional
//     `name` (default: the file's stem), `source` (where the set comes from) and `num_layers` (the
//     model it was made for; checked when present), and optionally `draft_vocab` (a pruned draft
//     vocabulary saved with the set: token ids, most frequent first; model/draft_vocabulary.hpp)
//     — see configs/skips/README.md; save_skip_set() writes such a file;
//   * comma-separated CLI lists (--skip-attn 3,5 --skip-mlp 6);
//   * a generator: uniform skipping of a fraction r of the 2L sublayers, evenly spread over depth
//     (SWIFT §4.1's starting point for its on-the-fly search); the exact rule is documented at
//     uniform_skip_set() below.
#pragma once

#include "model/layer_plan.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

struct SkipSet {
  std::string name;
  std::string source;             // provenance, for reports
  std::optional<int> num_layers;  // the layer count the set was made for, when known
  std::vector<int> attention;     // 0-based layer indices, sorted, unique
  std::vector<int> mlp;
  // Token ids of a pruned draft vocabulary, most frequent first (in file order); empty: none.
  std::vector<std::int32_t> draft_vocab = {};  // (= {}: aggregate initializers may omit it)

  // The draft plan for a model with `model_layers` layers. Throws selfspec::Error naming the set
  // and the index when an index is out of range, or when the set was made for a different layer
  // count.
  LayerPlan plan(int model_layers) const;
  // Compact JSON for reports:
  // {"name":..,"source":..,"num_layers":40 or null,"attention":[..],"mlp":[..]}, plus
  // "draft_vocab_size": N when the set carries a draft vocabulary (not its ids).
  std::string describe() const;

  bool operator==(const SkipSet& other) const = default;
};

// Reads a skip-set file (YAML or JSON; JSON is YAML). The top level must be a mapping whose keys
// are among `name`, `source`, `num_layers`, `attention`, `mlp` and `draft_vocab`; unknown or
// repeated keys are errors. `attention`/`mlp` are sequences of non-negative integers (missing,
// null or [] = none), without duplicates, and below `num_layers` when that is given; they are
// returned sorted. `draft_vocab` is a sequence of distinct non-negative token ids, kept in file
// order (the model's vocabulary size is checked where it is used).
// Errors name the file and the offending key or index (e.g. "x.yaml: attention[3] = 40 ...").
SkipSet load_skip_set(const std::filesystem::path& file);

// Writes `set` as a JSON skip-set file that load_skip_set() reads back equal (name, source,
// num_layers when known, attention, mlp, draft_vocab when not empty). Errors name the file.
void save_skip_set(const std::filesystem::path& file, const SkipSet& set);

// Parses "3,5,9" (whitespace around items is ignored; an empty or blank string: no layers) into a
// sorted list. Empty items, non-integers, negative numbers and duplicates are errors naming
// `option` (e.g. "--skip-attn") and the item.
std::vector<int> parse_layer_list(std::string_view text, std::string_view option);

// Uniform skipping (SWIFT §4.1's initial draft: "uniformly skipping layers"). With L =
// num_layers, the set skips n = std::lround(ratio × 2L) of the 2L sublayers (halves round away
// from zero), by whole layers spread evenly over depth:
//   * the interior layers are 1 .. L-2 (I = max(0, L-2) of them; the first and last layers matter
//     most for the embedding and the logits). When n <= 2I, m = ceil(n/2) layers are chosen as the
//     centres of m equal bins of the interior, l_k = 1 + floor((2k+1)·I / (2m)) for k < m, and
//     both their sublayers are skipped — except, when n is odd, the middle one (k = floor(m/2)),
//     which skips only its attention. Consecutive chosen layers are then floor(I/m) or ceil(I/m)
//     apart, and the unchosen margins at either end of the interior are at most I/(2m).
//   * when n > 2I, every interior sublayer is skipped and then the first and last layers'
//     sublayers, in the order MLP 0, attention L-1, attention 0, MLP L-1 (innermost first,
//     alternating ends), as many as needed (ratio close to 1 may round to all 2L sublayers).
// Deterministic. name = "uniform-r<ratio>" (ratio printed in its shortest form, e.g.
// "uniform-r0.45"), source = "SWIFT §4.1: uniform layer skipping as the starting point of the
// on-the-fly search", num_layers = L. Throws selfspec::Error unless ratio is in [0, 1) and
// num_layers in [1, LayerPlan::kMaxLayers].
SkipSet uniform_skip_set(int num_layers, double ratio);

}  // namespace selfspec
