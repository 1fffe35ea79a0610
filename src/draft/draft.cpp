#include "draft/draft.hpp"

#include "core/error.hpp"

namespace selfspec {

void Draft::clear() {
  tokens_.clear();
  parents_.clear();
  confidences_.clear();
  kinds_.clear();
  drawn_ = 0;
  sourced_ = 0;
  lookup_ = false;
}

int Draft::add(std::int32_t token, int parent, double confidence) {
  return append(token, parent, confidence, Kind::kDrawn);
}

int Draft::add_alternative(std::int32_t token, int parent) {
  return append(token, parent, 0.0, Kind::kAlternative);
}

int Draft::add_sourced(std::int32_t token, int parent) {
  return append(token, parent, 0.0, Kind::kSourced);
}

Draft Draft::prefix(int nodes) const {
  SELFSPEC_CHECK(nodes >= 0 && nodes <= size(), "the first {} nodes of a draft of {}", nodes,
                 size());
  Draft out;
  for (int node = 0; node < nodes; ++node) {
    out.append(token(node), parent(node), confidence(node), kind(node));
  }
  out.lookup_ = lookup_;
  return out;
}

int Draft::append(std::int32_t token, int parent, double confidence, Kind kind) {
  SELFSPEC_CHECK(parent >= kRoot && parent < size(),
                 "draft node {} cannot continue node {} (the draft has {} nodes)", size(), parent,
                 size());
  SELFSPEC_CHECK(child_with(parent, token) == kRoot,
                 "draft node {}: node {} already has a child with token {} (siblings must differ)",
                 size(), parent, token);
  tokens_.push_back(token);
  parents_.push_back(parent);
  confidences_.push_back(confidence);
  kinds_.push_back(kind);
  if (kind == Kind::kDrawn) ++drawn_;
  if (kind == Kind::kSourced) ++sourced_;
  return size() - 1;
}

bool Draft::is_chain() const {
  for (int i = 0; i < size(); ++i) {
    if (parent(i) != i - 1) return false;
  }
  return true;
}

int Draft::depth(int node) const {
  int depth = 0;
  for (; node != kRoot; node = parent(node)) ++depth;
  return depth;
}

std::vector<int> Draft::children(int node) const {
  std::vector<int> out;
  for (int i = node + 1; i < size(); ++i) {
    if (parent(i) == node) out.push_back(i);
  }
  return out;
}

int Draft::child_with(int node, std::int32_t token) const {
  for (int i = node + 1; i < size(); ++i) {
    if (parent(i) == node && this->token(i) == token) return i;
  }
  return kRoot;
}

std::vector<int> Draft::path_of(std::span<const std::int32_t> tokens) const {
  std::vector<int> path;
  int node = kRoot;
  for (const std::int32_t token : tokens) {
    node = child_with(node, token);
    SELFSPEC_CHECK(node != kRoot, "token {} (path position {}) is not in the draft tree", token,
                   path.size());
    path.push_back(node);
  }
  return path;
}

bool Draft::is_prefix(std::span<const int> path) {
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] != static_cast<int>(i)) return false;
  }
  return true;
}

AttentionMask Draft::tree_mask() const {
  // Row/column 0 is the root; node i is row/column i + 1.
  const auto n = static_cast<std::size_t>(size() + 1);
  std::vector<std::uint8_t> ancestors(n * n, 0);
  for (std::size_t row = 0; row < n; ++row) {
    ancestors[row * n] = 1;  // everything continues the root
    for (int node = static_cast<int>(row) - 1; node != kRoot; node = parent(node)) {
      ancestors[row * n + static_cast<std::size_t>(node + 1)] = 1;
    }
  }
  return AttentionMask::tree(static_cast<std::int64_t>(n), std::move(ancestors));
}

}  // namespace selfspec
