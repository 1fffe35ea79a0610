// A draft: candidate tokens that continue the last committed token (the draft's root), each with
// the node it continues — a chain today (every node continues the one before), a token tree when
// several candidates share a parent (SWIFT §5's dynamic tree verification, SpecInfer-style trees).
// Nodes are kept in the order they were drafted, which is also the order verification feeds them
// to the model: node i sits at position root + 1 + i of the verification forward, and a parent
// always comes before its children, so tree_mask() is a valid AttentionMask::tree.
// Every rank holds the same draft: rank 0 chooses the tokens and broadcasts them as they are
// drafted.
#pragma once

#include "model/attention_mask.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace selfspec {

class Draft {
 public:
  static constexpr int kRoot = -1;  // the parent of the first node(s): the last committed token

  void clear();
  // Appends a node continuing `parent` (kRoot or an earlier node); returns its index.
  int add(std::int32_t token, int parent, double confidence);

  int size() const { return static_cast<int>(tokens_.size()); }
  bool empty() const { return tokens_.empty(); }
  std::int32_t token(int node) const { return tokens_[static_cast<std::size_t>(node)]; }
  int parent(int node) const { return parents_[static_cast<std::size_t>(node)]; }
  // The draft distribution's top probability when the node was drafted (rank 0; 0 elsewhere).
  double confidence(int node) const { return confidences_[static_cast<std::size_t>(node)]; }
  std::span<const std::int32_t> tokens() const { return tokens_; }
  std::span<const int> parents() const { return parents_; }
  std::span<const double> confidences() const { return confidences_; }
  // The last node added (kRoot when empty).
  int last() const { return size() - 1; }

  // True when every node continues the one before it (a chain; also true when empty).
  bool is_chain() const;
  // Nodes between the root and `node`, `node` included (1 for a child of the root).
  int depth(int node) const;
  // The attention mask of the verification forward over [root, node 0, ..., node n-1]: each
  // token sees itself and its ancestors (causal for a chain).
  AttentionMask tree_mask() const;

 private:
  std::vector<std::int32_t> tokens_;
  std::vector<int> parents_;
  std::vector<double> confidences_;
};

}  // namespace selfspec
