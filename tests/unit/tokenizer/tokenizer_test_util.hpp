// Helpers shared by the tokenizer tests: reading/writing files, printable strings in failure
// messages, and an id-list formatter.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec::testing {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void write_file(const std::filesystem::path& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// `text` with control characters and non-ASCII bytes escaped, for failure messages.
inline std::string printable(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u >= 0x7F) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

inline std::string format_ids(const std::vector<std::int32_t>& ids) {
  return fmt::format("[{}]", fmt::join(ids, ", "));
}

}  // namespace selfspec::testing
