#include "launch/human_units.hpp"

#include <fmt/format.h>

namespace selfspec::launch {

std::string human_bytes(std::uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.2f} kB", b / 1e3);
  return fmt::format("{} B", bytes);
}

}  // namespace selfspec::launch
