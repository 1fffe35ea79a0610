// GPT-2's byte <-> unicode table, as HF tokenizers' ByteLevel pre-tokenizer and decoder use it:
// the printable bytes 33..126, 161..172 and 174..255 stand for themselves and the other 68 bytes
// map, in order, to U+0100.. (so a space is "Ġ" U+0120 and a newline "Ċ" U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace selfspec::byte_level {

// UTF-8 of the character that stands for `byte`.
std::string_view encode_byte(std::uint8_t byte);

// Every byte of `bytes` replaced by its character (ByteLevel pre-tokenizer).
std::string encode(std::string_view bytes);

// Appends the bytes a token stands for, as HF's ByteLevel decoder does: when every character of
// `token` is in the table, the bytes they stand for; otherwise the token's own UTF-8 bytes (added
// tokens such as "<|eot_id|>" consist of table characters and decode to themselves).
void append_decoded_token(std::string_view token, std::string& out);

}  // namespace selfspec::byte_level
