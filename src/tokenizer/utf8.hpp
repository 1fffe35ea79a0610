// UTF-8 helpers shared by the tokenizers: well-formedness checks, lossy repair exactly as Rust's
// String::from_utf8_lossy (one U+FFFD per maximal invalid subpart, the Unicode "best practice"
// that HF tokenizers' ByteLevel decoder inherits), and the Unicode White_Space property that
// Oniguruma's \s and Rust's char::is_whitespace use.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace selfspec::utf8 {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence starting at `pos`, or 0 when the bytes there are not
// one (invalid lead byte, bad continuation, overlong form, surrogate, truncated).
std::size_t sequence_length(std::string_view text, std::size_t pos);

// Code point of the well-formed sequence of `length` bytes at `pos` (from sequence_length()).
char32_t decode(std::string_view text, std::size_t pos, std::size_t length);

bool is_valid(std::string_view text);

// `bytes` with every maximal invalid subpart replaced by U+FFFD (String::from_utf8_lossy).
std::string to_valid_lossy(std::string_view bytes);

void append(std::string& out, char32_t code_point);

// The Unicode White_Space property (Rust char::is_whitespace, Oniguruma \s).
bool is_white_space(char32_t code_point);

// Number of bytes of the leading white space of `text` / start of its trailing white space.
// `text` must be valid UTF-8.
std::size_t leading_white_space_bytes(std::string_view text);
std::size_t trailing_white_space_start(std::string_view text);

}  // namespace selfspec::utf8
