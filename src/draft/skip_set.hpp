// Skip sets: which attention and MLP sublayers a layer-skip draft leaves out (Draft & Verify §3.1:
// the draft is the model with a subset of its 2L sublayers bypassed). Sources:
//   * a YAML or JSON file — `{attention: [3, 5], mlp: [6]}` with 0-based layer indices, optional
//     `name`, `source` (where the set comes from) and `num_layers` (the model it was made for;
//     checked when present) — see configs/skips/;
//   * comma-separated CLI lists (--skip-attn 3,5 --skip-mlp 6);
//   * a generator: uniform skipping of a fraction r of the 2L sublayers, evenly spread over depth
//     (SWIFT §4.1's starting point for its on-the-fly search).
#pragma once

#include "model/layer_plan.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

struct SkipSet {
  std::string name;
  std::string source;               // provenance, for reports
  std::optional<int> num_layers;    // the layer count the set was made for, when known
  std::vector<int> attention;       // 0-based layer indices, sorted, unique
  std::vector<int> mlp;

  // The draft plan for a model with `num_layers` layers. Throws selfspec::Error when an index is
  // out of range or the set was made for a different layer count.
  LayerPlan plan(int num_layers) const;
  // {"name", "source", "attention": [...], "mlp": [...]} (JSON) for reports.
  std::string describe() const;
};

// Reads a skip-set file (YAML or JSON). Errors name the file and the offending key or index.
SkipSet load_skip_set(const std::filesystem::path& file);

// Parses "3,5,9" (empty string: no layers). Errors name `option` (e.g. "--skip-attn").
std::vector<int> parse_layer_list(std::string_view text, std::string_view option);

// Uniform skipping: round(ratio × 2L) sublayers, alternating attention and MLP sublayers and
// spread evenly over depth so that no region of the model loses more than its share; the first
// and last layers are skipped last (they matter most for the embedding and the logits).
// ratio in [0, 1); throws otherwise.
SkipSet uniform_skip_set(int num_layers, double ratio);

}  // namespace selfspec
