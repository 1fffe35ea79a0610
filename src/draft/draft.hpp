// A draft: candidate tokens that continue the last committed token (the draft's root), each with
// the node it continues — a chain (every node continues the one before), or a token tree when
// several candidates share a parent (SWIFT §4.2's dynamic verification; SpecInfer's token trees,
// Miao et al. 2024 §3). A node is either drawn — the token a draft step picked from its draft
// distribution q (the argmax when greedy) — or an alternative: one of the next most likely tokens
// of the same q, added as a sibling of the drawn node (a leaf: drafting continues from the drawn
// node only). A node may also be sourced: a token a draft source proposed (a lookup
// continuation, draft/draft_source.hpp) grafted onto the model's draft as a branch of the same
// tree (SourcedDrafter's --lookup-tree rounds); sourced nodes are point masses, like alternatives,
// may continue one another, and come after every node the model drafted. Siblings carry distinct
// tokens, so a sequence of tokens names at most one path (path_of). Nodes are kept in the order
// they were drafted, which is also the order verification feeds them to the model: node i is row 1
// + i of the verification forward (row 0 is the root) at position root + depth(i), and a parent
// always comes before its children, so tree_mask() is a valid AttentionMask::tree. Every rank holds
// the same draft: rank 0 chooses the tokens and broadcasts them as they are drafted.
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
  // Appends a drawn node continuing `parent` (kRoot or an earlier node); returns its index.
  // Throws when a sibling already carries `token`.
  int add(std::int32_t token, int parent, double confidence);
  // Appends an alternative to the drawn child of `parent` (a sibling, with the same parent);
  // returns its index. Throws when a sibling already carries `token`.
  int add_alternative(std::int32_t token, int parent);
  // Appends a sourced node continuing `parent` (kRoot, a drafted node or another sourced node);
  // returns its index. Throws when a sibling already carries `token`.
  int add_sourced(std::int32_t token, int parent);
  // The first `nodes` nodes (every parent comes before its children, so they form a draft), with
  // the lookup mark.
  Draft prefix(int nodes) const;

  int size() const { return static_cast<int>(tokens_.size()); }
  bool empty() const { return tokens_.empty(); }
  std::int32_t token(int node) const { return tokens_[static_cast<std::size_t>(node)]; }
  int parent(int node) const { return parents_[static_cast<std::size_t>(node)]; }
  // The draft distribution's top probability when the node was drafted (rank 0; 0 elsewhere).
  double confidence(int node) const { return confidences_[static_cast<std::size_t>(node)]; }
  std::span<const std::int32_t> tokens() const { return tokens_; }
  std::span<const int> parents() const { return parents_; }
  std::span<const double> confidences() const { return confidences_; }
  // True for an alternative (add_alternative), false for a drawn node.
  bool is_alternative(int node) const { return kind(node) == Kind::kAlternative; }
  // True for a sourced node (add_sourced).
  bool is_sourced(int node) const { return kind(node) == Kind::kSourced; }
  // True for a node proposed deterministically, not drawn from a draft distribution: an
  // alternative or a sourced node (sampled verification accepts it with the target's probability).
  bool is_point_mass(int node) const { return kind(node) != Kind::kDrawn; }
  // Sourced nodes (add_sourced).
  int sourced() const { return sourced_; }
  // The last node added (kRoot when empty).
  int last() const { return size() - 1; }
  // Drawn nodes: the draft steps the round ran (the longest path's length).
  int drawn() const { return drawn_; }
  // A lookup draft (draft/ngram_lookup.hpp): its nodes were copied from the sequence, not drawn
  // by draft forwards, so draft-length controllers do not learn from its verdict.
  void mark_lookup() { lookup_ = true; }
  bool from_lookup() const { return lookup_; }

  // True when every node continues the one before it (a chain; also true when empty).
  bool is_chain() const;
  // Nodes between the root and `node`, `node` included (1 for a child of the root).
  int depth(int node) const;
  // The children of `node` (kRoot: the root's), in node order: the drawn child first.
  std::vector<int> children(int node) const;
  // The child of `node` carrying `token`, or kRoot when there is none.
  int child_with(int node, std::int32_t token) const;
  // The path from the root that spells `tokens` (each a child of the one before), as node
  // indices; throws when no such path exists.
  std::vector<int> path_of(std::span<const std::int32_t> tokens) const;
  // True when `path` (node indices, root to leaf) is nodes 0, 1, ..., n-1: the accepted rows are
  // already where the committed sequence needs them.
  static bool is_prefix(std::span<const int> path);
  // The attention mask of the verification forward over [root, node 0, ..., node n-1]: each
  // token sees itself and its ancestors (causal for a chain).
  AttentionMask tree_mask() const;

 private:
  enum class Kind : std::uint8_t { kDrawn, kAlternative, kSourced };

  std::vector<std::int32_t> tokens_;
  std::vector<int> parents_;
  std::vector<double> confidences_;
  std::vector<Kind> kinds_;
  int drawn_ = 0;
  int sourced_ = 0;
  bool lookup_ = false;

  Kind kind(int node) const { return kinds_[static_cast<std::size_t>(node)]; }
  int append(std::int32_t token, int parent, double confidence, Kind kind);
};

}  // namespace selfspec
