// Added tokens as HF tokenizers' AddedVocabulary handles them: tokens (special ones like
// "<|im_start|>", or user-defined ones) that are cut out of the text whole before the model sees
// it. Shared by BpeTokenizer (tokenizer.json "added_tokens") and the GGUF SentencePiece tokenizer
// (control and user-defined tokens of tokenizer.ggml.token_type).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace selfspec {

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
};

// A piece of the input on its way through the pipeline: text still to tokenize, or an added
// token already recognised.
struct Segment {
  std::string text;
  std::optional<std::int32_t> added_id;
};

// Leftmost-longest exact matching of a set of added tokens (HF's Aho-Corasick with
// MatchKind::LeftmostLongest), with the single_word / lstrip / rstrip rules of find_matches.
// The tokens are borrowed: they must outlive the splitter.
class AddedTokenSplitter {
 public:
  AddedTokenSplitter() = default;
  // Tokens with empty content are ignored.
  explicit AddedTokenSplitter(std::vector<const AddedToken*> tokens);

  bool empty() const { return tokens_.empty(); }

  // Appends the pieces of `text` (HF find_matches + split_with_indices) to `out`.
  void split(const std::string& text, std::vector<Segment>& out) const;

 private:
  // (position, token index) of the leftmost-longest match at or after `from`.
  std::optional<std::pair<std::size_t, std::size_t>> find(std::string_view text,
                                                          std::size_t from) const;
  // Whether a single_word token's match [start, stop) stands alone as a word.
  static bool is_single_word(std::string_view text, std::size_t start, std::size_t stop);

  std::vector<const AddedToken*> tokens_;
  std::array<std::vector<std::size_t>, 256> by_first_byte_;
};

}  // namespace selfspec
