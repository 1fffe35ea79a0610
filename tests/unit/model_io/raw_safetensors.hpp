// Helpers for tests that build safetensors files byte by byte (to exercise every validation path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace selfspec::testing {

// The 8-byte little-endian header length.
inline std::string le_u64(std::uint64_t value) {
  std::string bytes(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xffu);
  return bytes;
}

// A safetensors file: length prefix, the header text verbatim (padded with spaces to a multiple of
// 8 when `pad`), then `data_bytes` bytes of data (a counting pattern).
inline std::string raw_safetensors(std::string_view header, std::size_t data_bytes,
                                   bool pad = true) {
  std::string text(header);
  if (pad) text.append((8 - text.size() % 8) % 8, ' ');
  std::string out = le_u64(text.size()) + text;
  for (std::size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(i & 0xffu));
  return out;
}

inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace selfspec::testing
