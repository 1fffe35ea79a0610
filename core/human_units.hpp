// Human-readable sizes for terminal output: memory as GPU memory is sold ("17.24 GB", decimal
// units), messages as the collective benchmarks state them ("32.0 KiB", binary units).
#pragma once

#include <cstdint>
#include <string>

namespace selfspec {

std::string human_bytes(std::uint64_t bytes);
std::string message_bytes(std::uint64_t bytes);

}  // namespace selfspec
