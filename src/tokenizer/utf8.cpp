// UTF-8 helpers (see utf8.hpp). to_valid_lossy() follows Rust's String::from_utf8_lossy: a
// maximal prefix of a well-formed sequence that cannot be completed becomes a single U+FFFD, a
// byte that cannot start a sequence becomes its own U+FFFD (Unicode 15, section 3.9, U+FFFD
// substitution of maximal subparts).
#include "tokenizer/utf8.hpp"

#include <cstdint>

namespace selfspec::utf8 {
namespace {

struct ByteRange {
  std::uint8_t lo;
  std::uint8_t hi;
};

// Expected sequence length and the allowed range of the second byte for a lead byte
// (Unicode Table 3-7); length 0 for bytes that cannot start a sequence.
struct LeadInfo {
  std::size_t length;
  ByteRange second;
};

LeadInfo lead_info(std::uint8_t b) {
  if (b < 0x80) return {1, {0, 0}};
  if (b >= 0xC2 && b <= 0xDF) return {2, {0x80, 0xBF}};
  if (b == 0xE0) return {3, {0xA0, 0xBF}};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, {0x80, 0xBF}};
  if (b == 0xED) return {3, {0x80, 0x9F}};
  if (b == 0xF0) return {4, {0x90, 0xBF}};
  if (b >= 0xF1 && b <= 0xF3) return {4, {0x80, 0xBF}};
  if (b == 0xF4) return {4, {0x80, 0x8F}};
  return {0, {0, 0}};
}

// Number of bytes at `pos` that form a (possibly incomplete) prefix of a well-formed sequence,
// and whether that prefix is a whole sequence.
struct Prefix {
  std::size_t bytes;
  bool complete;
};

Prefix valid_prefix(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<std::uint8_t>(text[pos]);
  const LeadInfo info = lead_info(lead);
  if (info.length == 0) return {0, false};
  if (info.length == 1) return {1, true};
  std::size_t n = 1;
  while (n < info.length && pos + n < text.size()) {
    const auto b = static_cast<std::uint8_t>(text[pos + n]);
    const ByteRange range = n == 1 ? info.second : ByteRange{0x80, 0xBF};
    if (b < range.lo || b > range.hi) break;
    ++n;
  }
  return {n, n == info.length};
}

}  // namespace

std::size_t sequence_length(std::string_view text, std::size_t pos) {
  if (pos >= text.size()) return 0;
  const Prefix p = valid_prefix(text, pos);
  return p.complete ? p.bytes : 0;
}

char32_t decode(std::string_view text, std::size_t pos, std::size_t length) {
  const auto b0 = static_cast<std::uint8_t>(text[pos]);
  if (length == 1) return b0;
  char32_t cp = b0 & (0x7F >> length);
  for (std::size_t i = 1; i < length; ++i) {
    cp = (cp << 6) | (static_cast<std::uint8_t>(text[pos + i]) & 0x3F);
  }
  return cp;
}

bool is_valid(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<std::uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const std::size_t n = sequence_length(text, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string to_valid_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const Prefix p = valid_prefix(bytes, pos);
    if (p.complete) {
      out.append(bytes.substr(pos, p.bytes));
      pos += p.bytes;
    } else {
      out.append(kReplacementCharacter);
      pos += p.bytes == 0 ? 1 : p.bytes;
    }
  }
  return out;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_white_space(char32_t cp) {
  switch (cp) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x2000 && cp <= 0x200A);
  }
}

std::size_t leading_white_space_bytes(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t n = sequence_length(text, pos);
    if (n == 0 || !is_white_space(decode(text, pos, n))) break;
    pos += n;
  }
  return pos;
}

std::size_t trailing_white_space_start(std::string_view text) {
  std::size_t start = std::string_view::npos;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t n = sequence_length(text, pos);
    const bool white = n != 0 && is_white_space(decode(text, pos, n));
    if (!white) {
      start = std::string_view::npos;
    } else if (start == std::string_view::npos) {
      start = pos;
    }
    pos += n == 0 ? 1 : n;
  }
  return start == std::string_view::npos ? text.size() : start;
}

}  // namespace selfspec::utf8
