// How wide a draft tree grows: SWIFT §4.2's confidence-aware dynamic verification. Each draft
// step's drawn token is verified together with the next most likely tokens of the same draft
// distribution, k in all, with k set by the step's top-1 confidence p: SWIFT uses k = 10, 5, 3
// and 1 for p in (0, 0.5], (0.5, 0.8], (0.8, 0.95] and (0.95, 1]. The alternatives become
// siblings of the drawn token in the round's Draft (draft/draft.hpp); the verifier walks the tree
// (verify/token_picker.hpp). `chain()` (k = 1 everywhere) is plain chain drafting.
//
// Text form (--tree): "none" (the chain), "swift" (the paper's bins), or "P:K,P:K,...": bins by
// ascending upper bound P in (0, 1] with width K >= 1; the last bound must be 1.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

class TreeWidths {
 public:
  struct Bin {
    double upper = 1.0;  // confidences in (previous upper, upper]
    int width = 1;       // tokens verified for the step: the drawn one + width - 1 alternatives
  };

  static TreeWidths chain();
  static TreeWidths swift();
  // Parses the text form; throws selfspec::Error naming `option` when it is malformed.
  static TreeWidths parse(std::string_view text, std::string_view option = "--tree");

  // Tokens verified for a draft step whose top-1 confidence is `confidence` (at least 1).
  int width(double confidence) const;
  // The widest bin's width.
  int max_width() const;
  bool is_chain() const { return max_width() == 1; }
  // The text form ("none" for the chain).
  std::string describe() const;

 private:
  explicit TreeWidths(std::vector<Bin> bins) : bins_(std::move(bins)) {}
  std::vector<Bin> bins_;
};

}  // namespace selfspec
