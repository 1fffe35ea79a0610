// AddedTokenSplitter (see added_tokens.hpp): HF tokenizers' AddedVocabulary::find_matches and
// split_with_indices.
#include "tokenizer/added_tokens.hpp"

#include "tokenizer/pcre2_regex.hpp"
#include "tokenizer/utf8.hpp"

#include <algorithm>

namespace selfspec {
namespace {

// Rust regex \w (Unicode): Alphabetic, marks, decimal numbers, connector punctuation,
// Join_Control. Alphabetic is approximated by L and Nl (Other_Alphabetic chars are in M).
const Pcre2Regex& word_start_regex() {
  static const Pcre2Regex kRegex(R"(^[\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])",
                                 Pcre2Regex::Syntax::kOniguruma, "added-token word check");
  return kRegex;
}
const Pcre2Regex& word_end_regex() {
  static const Pcre2Regex kRegex(R"([\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]\z)",
                                 Pcre2Regex::Syntax::kOniguruma, "added-token word check");
  return kRegex;
}

}  // namespace

AddedTokenSplitter::AddedTokenSplitter(std::vector<const AddedToken*> tokens) {
  for (const AddedToken* token : tokens) {
    if (!token->content.empty()) tokens_.push_back(token);
  }
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& content = tokens_[i]->content;
    by_first_byte_[static_cast<unsigned char>(content[0])].push_back(i);
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
      return tokens_[a]->content.size() > tokens_[b]->content.size();
    });
  }
}

void AddedTokenSplitter::split(const std::string& text, std::vector<Segment>& out) const {
  if (tokens_.empty() || text.empty()) {
    if (!text.empty()) out.push_back({text, std::nullopt});
    return;
  }
  const std::string_view view(text);
  std::size_t start_offset = 0;
  std::size_t search = 0;
  while (true) {
    const auto match = find(text, search);
    if (!match) break;
    const AddedToken& token = *tokens_[match->second];
    std::size_t start = match->first;
    std::size_t stop = start + token.content.size();
    search = stop;
    if (token.single_word && !is_single_word(view, start, stop)) continue;
    if (token.lstrip) {
      start = std::max(utf8::trailing_white_space_start(view.substr(0, start)), start_offset);
    }
    if (token.rstrip) stop += utf8::leading_white_space_bytes(view.substr(stop));
    start = std::max(start, start_offset);
    if (start_offset < start) out.push_back({text.substr(start_offset, start - start_offset), {}});
    out.push_back({text.substr(start, stop - start), token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({text.substr(start_offset), std::nullopt});
}

bool AddedTokenSplitter::is_single_word(std::string_view text, std::size_t start,
                                        std::size_t stop) {
  // Only the last character before the match matters.
  std::size_t last = start;
  while (last > 0 && (static_cast<unsigned char>(text[last - 1]) & 0xC0) == 0x80) --last;
  if (last > 0) --last;
  const bool start_space = start == 0 || !word_end_regex().search(text.substr(last, start - last));
  const bool stop_space = stop == text.size() || !word_start_regex().search(text.substr(stop));
  return start_space && stop_space;
}

std::optional<std::pair<std::size_t, std::size_t>> AddedTokenSplitter::find(
    std::string_view text, std::size_t from) const {
  for (std::size_t pos = from; pos < text.size(); ++pos) {
    for (const std::size_t i : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      if (text.substr(pos).starts_with(tokens_[i]->content)) return std::make_pair(pos, i);
    }
  }
  return std::nullopt;
}

}  // namespace selfspec
