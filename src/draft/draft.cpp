#include "draft/draft.hpp"

#include "core/error.hpp"

namespace selfspec {

void Draft::clear() {
  tokens_.clear();
  parents_.clear();
  confidences_.clear();
}

int Draft::add(std::int32_t token, int parent, double confidence) {
  SELFSPEC_CHECK(parent >= kRoot && parent < size(),
                 "draft node {} cannot continue node {} (the draft has {} nodes)", size(), parent,
                 size());
  tokens_.push_back(token);
  parents_.push_back(parent);
  confidences_.push_back(confidence);
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
