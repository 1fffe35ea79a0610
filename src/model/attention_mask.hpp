// Which of the T tokens of one forward call may attend to which: causal (token t sees tokens
// j <= t of the same call), or a tree (token t sees token j when ancestors[t * T + j] is 1; used
// by tree verification). Every token always sees all cache slots written before the call.
#pragma once

#include <cstdint>
#include <vector>

namespace selfspec {

class AttentionMask {
 public:
  static AttentionMask causal() { return AttentionMask(); }
  // ancestors: row-major T × T of 0/1; the diagonal must be 1 and j > t must be 0.
  static AttentionMask tree(std::int64_t n_tokens, std::vector<std::uint8_t> ancestors);

  bool is_causal() const { return ancestors_.empty(); }
  std::int64_t n_tokens() const { return n_tokens_; }
  // nullptr for causal.
  const std::uint8_t* data() const { return ancestors_.empty() ? nullptr : ancestors_.data(); }

 private:
  std::int64_t n_tokens_ = 0;
  std::vector<std::uint8_t> ancestors_;
};

}  // namespace selfspec
