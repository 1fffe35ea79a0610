// What the parser fuzz targets share: libFuzzer's input viewed as bytes or text, splitting it
// into two parts, `require`, the invariant check whose failure is a finding like a crash, and
// `allowing_errors` for steps that may fail with a clear error.
#pragma once

#include "core/error.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>
#include <utility>

namespace selfspec::fuzz {

inline std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// "head\0tail" -> {head, tail}; without a NUL byte the tail is empty.
inline std::pair<std::string_view, std::string_view> split_at_nul(std::string_view input) {
  const std::size_t nul = input.find('\0');
  if (nul == std::string_view::npos) return {input, {}};
  return {input.substr(0, nul), input.substr(nul + 1)};
}

// The last `bytes` bytes of the input (all of it when shorter): a fuzzer-made text for formats
// that cannot carry a suffix of their own.
inline std::string_view trailing_text(std::string_view input, std::size_t bytes) {
  return input.substr(input.size() - std::min(input.size(), bytes));
}

// A broken invariant aborts, so libFuzzer reports it and saves the input.
inline void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

// Runs `step`; a selfspec::Error is a clear answer, anything else reaches libFuzzer.
template <typename Step>
void allowing_errors(const Step& step) {
  try {
    step();
  } catch (const Error&) {
  }
}

}  // namespace selfspec::fuzz
