// A compiled PCRE2 regular expression (UTF + UCP, JIT-compiled when the library supports it) for
// the pre-tokenizer patterns of HF tokenizer.json files. HF tokenizers compiles them with
// Oniguruma; the two engines agree on the constructs these patterns use (classes of \p{L}/\p{N},
// (?i:...), look-ahead, counted repetition) except \s: Oniguruma's is exactly Unicode
// White_Space, PCRE2's UCP \s also matches U+180E, so \s and \S are spelled out as White_Space;
// and PCRE2 10.42 has Unicode 14 tables where HF's Oniguruma has Unicode 16, so \p{L} and \p{N}
// are widened by the letters and numbers added since.
#pragma once

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace selfspec {

class Pcre2Regex {
 public:
  enum class Syntax { kOniguruma, kLiteral };

  // `what` names the pattern's origin in error messages ("tokenizer.json: key ...").
  Pcre2Regex(std::string_view pattern, Syntax syntax, std::string_view what);

  // Leftmost non-overlapping matches as [begin, end) byte offsets, like Oniguruma's find_iter;
  // empty matches are skipped. `text` must be valid UTF-8.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

  // Whether the pattern matches somewhere in `text` (valid UTF-8).
  bool search(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct CodeDeleter {
    void operator()(pcre2_code* code) const { pcre2_code_free(code); }
  };
  // Runs one match from `offset`; false when there is none.
  bool match_at(std::string_view text, std::size_t offset, pcre2_match_data* data) const;

  std::string pattern_;  // as compiled
  std::string what_;
  std::unique_ptr<pcre2_code, CodeDeleter> code_;
};

// The Oniguruma pattern rewritten for PCRE2 (see the top comment); exposed for tests.
std::string oniguruma_to_pcre2(std::string_view pattern);

}  // namespace selfspec
