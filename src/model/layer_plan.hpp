// A LayerPlan says which sublayers a forward pass runs: for every layer, its attention sublayer
// and its MLP sublayer, each on or off. The full model is the plan with nothing skipped; a
// self-speculative draft is another plan (Draft & Verify §3.1: the 2L attention/MLP choices).
// A skipped sublayer passes the residual stream through unchanged, on every rank, so its
// all-reduce disappears too.
#pragma once

#include <bitset>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace selfspec {

class LayerPlan {
 public:
  static constexpr int kMaxLayers = 256;

  LayerPlan() = default;
  // Everything runs.
  static LayerPlan full(int num_layers);
  // Everything runs except the listed layers' attention / MLP sublayers (0-based indices).
  // Throws selfspec::Error naming the index when one is out of range.
  static LayerPlan skipping(int num_layers, std::span<const int> attention,
                            std::span<const int> mlp);

  int num_layers() const { return num_layers_; }
  bool runs_attention(int layer) const { return !skip_attention_[static_cast<std::size_t>(layer)]; }
  bool runs_mlp(int layer) const { return !skip_mlp_[static_cast<std::size_t>(layer)]; }
  void set_attention(int layer, bool run);
  void set_mlp(int layer, bool run);
  bool is_full() const { return skip_attention_.none() && skip_mlp_.none(); }
  int skipped_count() const;

  std::vector<int> skipped_attention() const;
  std::vector<int> skipped_mlp() const;
  // "attn[3,5] mlp[2]" or "full".
  std::string describe() const;

  // Fixed-size wire form for control messages: bit l of words [0, 4) = attention l skipped,
  // bit l of words [4, 8) = MLP l skipped.
  static constexpr int kMaskWords = 2 * kMaxLayers / 64;
  void to_mask(std::span<std::uint64_t, kMaskWords> words) const;
  static LayerPlan from_mask(int num_layers, std::span<const std::uint64_t, kMaskWords> words);

  bool operator==(const LayerPlan& other) const = default;

 private:
  void check_layer(int layer) const;
  int num_layers_ = 0;
  std::bitset<kMaxLayers> skip_attention_;
  std::bitset<kMaxLayers> skip_mlp_;
};

}  // namespace selfspec
