// Human-readable sizes for terminal output ("17.24 GB": decimal units, as GPU memory is sold).
#pragma once

#include <cstdint>
#include <string>

namespace selfspec::launch {

std::string human_bytes(std::uint64_t bytes);

}  // namespace selfspec::launch
