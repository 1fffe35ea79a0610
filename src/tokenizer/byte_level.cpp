// GPT-2 byte <-> unicode table (bytes_to_unicode() of openai/gpt-2 encoder.py, the table HF
// tokenizers' ByteLevel pre-tokenizer and decoder use).
#include "tokenizer/byte_level.hpp"

#include "tokenizer/utf8.hpp"

#include <array>

namespace selfspec::byte_level {
namespace {

struct Table {
  std::array<std::string, 256> byte_to_text;
  std::array<std::int16_t, 512> char_to_byte;  // code points < 512; -1 when not in the table

  Table() {
    char_to_byte.fill(-1);
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next_extra++;
      utf8::append(byte_to_text[static_cast<std::size_t>(b)], cp);
      char_to_byte[cp] = static_cast<std::int16_t>(b);
    }
  }
};

const Table& table() {
  static const Table kTable;
  return kTable;
}

}  // namespace

std::string_view encode_byte(std::uint8_t byte) {
  return table().byte_to_text[byte];
}

std::string encode(std::string_view bytes) {
  const Table& t = table();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out.append(t.byte_to_text[static_cast<std::uint8_t>(c)]);
  return out;
}

void append_decoded_token(std::string_view token, std::string& out) {
  const Table& t = table();
  const std::size_t start = out.size();
  std::size_t pos = 0;
  while (pos < token.size()) {
    const std::size_t n = utf8::sequence_length(token, pos);
    const char32_t cp = n == 0 ? 0xFFFFFFFF : utf8::decode(token, pos, n);
    if (n == 0 || cp >= t.char_to_byte.size() || t.char_to_byte[cp] < 0) {
      out.resize(start);
      out.append(token);
      return;
    }
    out.push_back(static_cast<char>(t.char_to_byte[cp]));
    pos += n;
  }
}

}  // namespace selfspec::byte_level
