// outline_jinja (see jinja_outline.hpp): splits the source into raw text and tags ({{ }}, {% %},
// {# #}) with their whitespace-control marks, collects the tags' string literals, and applies
// Jinja's whitespace rules to the raw text in between to see whether any of it is output.
#include "tokenizer/jinja_outline.hpp"

#include "tokenizer/utf8.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace selfspec {
namespace {

enum class TagKind { kExpression, kBlock, kComment };

struct Tag {
  TagKind kind = TagKind::kExpression;
  bool strip_before = false;  // "{%-": all white space before the tag goes
  bool keep_before = false;   // "{%+": lstrip_blocks does not apply
  bool strip_after = false;   // "-%}": all white space after the tag goes
  bool keep_after = false;    // "+%}": trim_blocks does not apply
  std::size_t begin = 0;      // the tag's first byte
  std::size_t end = 0;        // one past its last byte
};

bool is_white(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code point of `digits` hexadecimal digits at `pos`, or nullopt.
std::optional<char32_t> hex_code_point(std::string_view body, std::size_t pos, std::size_t digits) {
  if (pos + digits > body.size()) return std::nullopt;
  char32_t value = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const int v = hex_value(body[pos + i]);
    if (v < 0) return std::nullopt;
    value = value * 16 + static_cast<char32_t>(v);
  }
  if (value > 0x10FFFF) return std::nullopt;
  return value;
}

// Appends the character of the octal escape (up to three digits) at `pos`; returns the digits.
std::size_t append_octal(std::string_view body, std::size_t pos, std::string& out) {
  char32_t value = 0;
  std::size_t n = 0;
  while (n < 3 && pos + n < body.size() && body[pos + n] >= '0' && body[pos + n] <= '7') {
    value = value * 8 + static_cast<char32_t>(body[pos + n] - '0');
    ++n;
  }
  utf8::append(out, value);
  return n;
}

// Reads tags and raw text off a template source.
class Lexer {
 public:
  explicit Lexer(std::string_view source) : source_(source) {}

  JinjaOutline run() {
    std::vector<Tag> tags;
    std::size_t pos = 0;
    while (true) {
      const std::size_t start = next_tag_start(pos);
      if (start == std::string_view::npos) break;
      std::optional<Tag> tag = read_tag(start);
      if (!tag) return std::move(outline_);
      pos = tag->end;
      tags.push_back(*tag);
    }
    find_raw_output(tags);
    return std::move(outline_);
  }

 private:
  std::size_t next_tag_start(std::size_t pos) const {
    while (true) {
      pos = source_.find('{', pos);
      if (pos == std::string_view::npos || pos + 1 >= source_.size()) return std::string_view::npos;
      const char next = source_[pos + 1];
      if (next == '{' || next == '%' || next == '#') return pos;
      ++pos;
    }
  }

  std::optional<Tag> read_tag(std::size_t start) {
    Tag tag;
    tag.begin = start;
    const char opener = source_[start + 1];
    tag.kind = opener == '{'   ? TagKind::kExpression
               : opener == '%' ? TagKind::kBlock
                               : TagKind::kComment;
    std::size_t pos = start + 2;
    if (pos < source_.size() && (source_[pos] == '-' || source_[pos] == '+')) {
      (source_[pos] == '-' ? tag.strip_before : tag.keep_before) = true;
      ++pos;
    }
    const std::size_t close =
        tag.kind == TagKind::kComment ? find_comment_end(pos) : scan_code(pos, closer(tag.kind));
    if (close == std::string_view::npos) {
      outline_.error = fmt::format("unterminated {} starting at byte {}",
                                   tag.kind == TagKind::kComment ? "comment" : "tag", start);
      return std::nullopt;
    }
    if (close > pos && (source_[close - 1] == '-' || source_[close - 1] == '+')) {
      (source_[close - 1] == '-' ? tag.strip_after : tag.keep_after) = true;
    }
    tag.end = close + 2;
    return tag;
  }

  static std::string_view closer(TagKind kind) { return kind == TagKind::kBlock ? "%}" : "}}"; }

  std::size_t find_comment_end(std::size_t pos) const { return source_.find("#}", pos); }

  // Scans a tag's code from `pos` to its closer, collecting string literals; returns the
  // closer's position or npos.
  std::size_t scan_code(std::size_t pos, std::string_view close) {
    std::string code;
    while (pos < source_.size()) {
      const char c = source_[pos];
      if (c == '\'' || c == '"') {
        const std::size_t end = string_end(pos);
        if (end == std::string_view::npos) return std::string_view::npos;
        outline_.literals.push_back(unescape_jinja_string(source_.substr(pos + 1, end - pos - 1)));
        code += "\"\"";
        pos = end + 1;
        continue;
      }
      if (source_.substr(pos, close.size()) == close) {
        outline_.code += code;
        outline_.code += '\n';
        return pos;
      }
      code.push_back(c);
      ++pos;
    }
    return std::string_view::npos;
  }

  // The position of the quote closing the literal opened at `open`, or npos.
  std::size_t string_end(std::size_t open) {
    const char quote = source_[open];
    for (std::size_t pos = open + 1; pos < source_.size(); ++pos) {
      if (source_[pos] == '\\') {
        ++pos;
      } else if (source_[pos] == quote) {
        return pos;
      }
    }
    outline_.error = fmt::format("unterminated string literal starting at byte {}", open);
    return std::string_view::npos;
  }

  // Applies whitespace control to the raw text around and between the tags.
  void find_raw_output(const std::vector<Tag>& tags) {
    // keep_trailing_newline is off: one newline at the very end of the source is not output.
    std::string_view source = source_;
    if (source.ends_with('\n')) source.remove_suffix(1);
    std::size_t raw_begin = 0;
    for (std::size_t i = 0; i <= tags.size(); ++i) {
      const Tag* before = i > 0 ? &tags[i - 1] : nullptr;
      const Tag* after = i < tags.size() ? &tags[i] : nullptr;
      const std::size_t raw_end = after != nullptr ? after->begin : source.size();
      if (raw_end > raw_begin) {
        std::string_view raw = source.substr(raw_begin, raw_end - raw_begin);
        raw = apply_whitespace_control(raw, before, after);
        if (!raw.empty() && !outline_.raw_output) outline_.raw_output = std::string(raw);
      }
      if (after != nullptr) raw_begin = after->end;
    }
  }

  static std::string_view apply_whitespace_control(std::string_view raw, const Tag* before,
                                                   const Tag* after) {
    // lstrip_blocks: spaces and tabs from the start of a line up to a block or comment tag (the
    // line starts after the raw text's last newline, or with the template).
    std::size_t lstrip = 0;
    if (after != nullptr && after->kind != TagKind::kExpression && !after->keep_before &&
        !after->strip_before) {
      const std::size_t newline = raw.find_last_of('\n');
      if (newline != std::string_view::npos || before == nullptr) {
        const std::string_view tail =
            raw.substr(newline == std::string_view::npos ? 0 : newline + 1);
        if (tail.find_first_not_of(" \t") == std::string_view::npos) lstrip = tail.size();
      }
    }
    raw.remove_suffix(lstrip);
    if (after != nullptr && after->strip_before) {
      while (!raw.empty() && is_white(raw.back())) raw.remove_suffix(1);
    }
    if (before != nullptr && before->strip_after) {
      while (!raw.empty() && is_white(raw.front())) raw.remove_prefix(1);
    } else if (before != nullptr && before->kind != TagKind::kExpression && !before->keep_after) {
      // trim_blocks: the first newline after a block or comment tag.
      if (raw.starts_with("\r\n")) {
        raw.remove_prefix(2);
      } else if (raw.starts_with('\n')) {
        raw.remove_prefix(1);
      }
    }
    return raw;
  }

  std::string_view source_;
  JinjaOutline outline_;
};

bool is_identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

}  // namespace

bool JinjaOutline::has_literal(std::string_view text) const {
  return std::find(literals.begin(), literals.end(), text) != literals.end();
}

bool JinjaOutline::any_literal_contains(std::string_view text) const {
  return std::any_of(literals.begin(), literals.end(), [&](const std::string& literal) {
    return literal.find(text) != std::string::npos;
  });
}

bool JinjaOutline::code_has_word(std::string_view word) const {
  for (std::size_t pos = code.find(word); pos != std::string::npos;
       pos = code.find(word, pos + 1)) {
    const bool starts = pos == 0 || !is_identifier_char(code[pos - 1]);
    const std::size_t end = pos + word.size();
    const bool ends = end == code.size() || !is_identifier_char(code[end]);
    if (starts && ends) return true;
  }
  return false;
}

JinjaOutline outline_jinja(std::string_view source) {
  return Lexer(source).run();
}

std::string unescape_jinja_string(std::string_view body) {
  // One-character escapes and what they stand for, position by position.
  constexpr std::string_view kLetters = "\\'\"abfnrtv";
  constexpr std::string_view kValues = "\\'\"\a\b\f\n\r\t\v";
  std::string out;
  out.reserve(body.size());
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out.push_back(body[i]);
      continue;
    }
    const char e = body[++i];
    if (e == '\n') continue;  // a backslash-newline joins the lines
    if (const std::size_t k = kLetters.find(e); k != std::string_view::npos) {
      out.push_back(kValues[k]);
    } else if (e == 'x' || e == 'u' || e == 'U') {
      const std::size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      const std::optional<char32_t> cp = hex_code_point(body, i + 1, digits);
      if (cp) {
        utf8::append(out, *cp);
        i += digits;
      } else {
        out.push_back('\\');
        out.push_back(e);
      }
    } else if (e >= '0' && e <= '7') {
      i += append_octal(body, i, out) - 1;
    } else {
      out.push_back('\\');  // Python keeps unknown escapes as written
      out.push_back(e);
    }
  }
  return out;
}

}  // namespace selfspec
