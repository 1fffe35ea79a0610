// The verdict on a round's draft: which drafted nodes the target accepts (a path from the root:
// a prefix for a chain, one branch for a tree), the target's own token after them (the correction
// at the first rejection, or the bonus token when the whole path was accepted), and the KV-cache
// length once the round is committed (the round's start + the root + the accepted path). Rank 0
// computes it (verify/token_picker.hpp) and broadcasts it in its control message; every rank's
// commit step consumes it, and the drafter and the draft-length controller learn from it.
#pragma once

#include <cstdint>
#include <vector>

namespace selfspec {

struct Verdict {
  std::vector<int> accepted;     // accepted draft nodes, root to leaf
  std::int32_t next_token = -1;  // the target's own token after the accepted path
  std::int64_t kv_length = 0;    // KV cache length after the commit

  int accepted_count() const { return static_cast<int>(accepted.size()); }
  bool operator==(const Verdict& other) const = default;
};

}  // namespace selfspec
