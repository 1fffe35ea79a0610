// PCRE2 wrapper for the HF tokenizer.json pre-tokenizer patterns (see pcre2_regex.hpp). Matching
// semantics follow HF tokenizers' SysRegex::find_iter (Oniguruma): leftmost matches, scanning on
// from the end of each match.
#include "tokenizer/pcre2_regex.hpp"

#include "core/error.hpp"
#include "tokenizer/utf8.hpp"

#include <array>

namespace selfspec {
namespace {

// The Unicode White_Space property as a class body: Oniguruma's \s. PCRE2's UCP \s differs (it
// adds U+180E through \h), so \s and \S are spelled out.
constexpr std::string_view kSpaceClassBody =
    R"(\x{9}-\x{D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F})"
    R"(\x{3000})";

// Letters and numbers added in Unicode 15.0-16.0. PCRE2 10.42 knows Unicode 14; the Oniguruma
// of HF tokenizers 0.23 (and Rust's char tables) know Unicode 16, so \p{L} and \p{N} get these
// (derived by comparing the two engines over every code point; harmless with a newer PCRE2).
constexpr std::string_view kLetterClassBody =
    R"(\p{L}\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3})"
    R"(\x{10D4A}-\x{10D65}\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240})"
    R"(\x{11380}-\x{11389}\x{1138B}\x{1138E}\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3})"
    R"(\x{11BC0}-\x{11BE0}\x{11F02}\x{11F04}-\x{11F10}\x{11F12}-\x{11F33}\x{1342F})"
    R"(\x{13441}-\x{13446}\x{13460}-\x{143FA}\x{16100}-\x{1611D}\x{16D40}-\x{16D6C}\x{18CFF})"
    R"(\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A}\x{1E030}-\x{1E06D}\x{1E4D0}-\x{1E4EB})"
    R"(\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739}\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})";
constexpr std::string_view kNumberClassBody =
    R"(\p{N}\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59})"
    R"(\x{16130}-\x{16139}\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3})"
    R"(\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA})";

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
struct MatchContextDeleter {
  void operator()(pcre2_match_context* context) const { pcre2_match_context_free(context); }
};
struct JitStackDeleter {
  void operator()(pcre2_jit_stack* stack) const { pcre2_jit_stack_free(stack); }
};

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  pcre2_get_error_message(code, buffer.data(), buffer.size());
  return std::string(reinterpret_cast<const char*>(buffer.data()));
}

std::string escape_literal(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = u >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                       (c >= 'A' && c <= 'Z') || c == '_';
    if (!plain) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string oniguruma_to_pcre2(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  int class_depth = 0;
  bool class_start = false;  // just after '[' or '[^': a ']' here is a literal
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      ++i;
      class_start = false;
      const auto append_class = [&](std::string_view body) {
        if (class_depth > 0) {
          out.append(body);
        } else {
          out.append("[").append(body).append("]");
        }
      };
      if (e == 's') {
        append_class(kSpaceClassBody);
      } else if (e == 'p' && pattern.substr(i + 1, 3) == "{L}") {
        append_class(kLetterClassBody);
        i += 3;
      } else if (e == 'p' && pattern.substr(i + 1, 3) == "{N}") {
        append_class(kNumberClassBody);
        i += 3;
      } else if (e == 'S' && class_depth == 0) {
        out.append("[^").append(kSpaceClassBody).append("]");
      } else {
        out.push_back('\\');
        out.push_back(e);
      }
      continue;
    }
    if (c == '[') {
      if (class_depth > 0 && i + 1 < pattern.size() && pattern[i + 1] == ':') {
        // POSIX class such as [:alpha:]: copy through its closing ":]".
        const std::size_t close = pattern.find(":]", i + 2);
        if (close != std::string_view::npos) {
          out.append(pattern.substr(i, close + 2 - i));
          i = close + 1;
          class_start = false;
          continue;
        }
      }
      ++class_depth;
      out.push_back(c);
      class_start = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') {
        out.push_back('^');
        ++i;
      }
      continue;
    }
    if (c == ']' && class_depth > 0 && !class_start) {
      --class_depth;
    }
    class_start = false;
    out.push_back(c);
  }
  return out;
}

Pcre2Regex::Pcre2Regex(std::string_view pattern, Syntax syntax, std::string_view what)
    : pattern_(syntax == Syntax::kLiteral ? escape_literal(pattern) : oniguruma_to_pcre2(pattern)),
      what_(what) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                            PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr));
  if (!code_) {
    fail("{}: cannot compile regular expression '{}' (as PCRE2 '{}'): {} at offset {}", what_,
         pattern, pattern_, pcre2_message(error_code), error_offset);
  }
  // JIT is an optimisation only: without it (unsupported platform) the interpreter runs.
  static_cast<void>(pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE));
}

bool Pcre2Regex::match_at(std::string_view text, std::size_t offset, pcre2_match_data* data) const {
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc =
      pcre2_match(code_.get(), subject, text.size(), offset, PCRE2_NO_UTF_CHECK, data, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // Very long runs can exhaust the default 32 KiB JIT stack; retry with a large one.
    std::unique_ptr<pcre2_match_context, MatchContextDeleter> context(
        pcre2_match_context_create(nullptr));
    std::unique_ptr<pcre2_jit_stack, JitStackDeleter> stack(
        pcre2_jit_stack_create(64 * 1024, 256 * 1024 * 1024, nullptr));
    if (context && stack) {
      pcre2_jit_stack_assign(context.get(), nullptr, stack.get());
      rc = pcre2_match(code_.get(), subject, text.size(), offset, PCRE2_NO_UTF_CHECK, data,
                       context.get());
    }
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    fail("{}: matching regular expression '{}' failed: {}", what_, pattern_, pcre2_message(rc));
  }
  return true;
}

std::vector<std::pair<std::size_t, std::size_t>> Pcre2Regex::find_all(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(
      pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  SELFSPEC_CHECK(data != nullptr, "{}: out of memory for regex match data", what_);
  std::size_t offset = 0;
  while (offset <= text.size() && match_at(text, offset, data.get())) {
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const std::size_t begin = ovector[0];
    const std::size_t end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      if (begin >= text.size()) break;
      const std::size_t n = utf8::sequence_length(text, begin);
      offset = begin + (n == 0 ? 1 : n);
    }
  }
  return matches;
}

bool Pcre2Regex::search(std::string_view text) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(
      pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  SELFSPEC_CHECK(data != nullptr, "{}: out of memory for regex match data", what_);
  return match_at(text, 0, data.get());
}

}  // namespace selfspec
