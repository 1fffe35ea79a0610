// The contract of compact_rows, shared by the CPU kernel (kernels/cpu/row_compaction.hpp) and the
// CUDA kernel (kernels/cuda/cuda_kernels.hpp) so both accept exactly the same arguments: the row
// limit and the argument check. Free of fmt (nvcc compiles the CUDA side), so the check returns
// its message and each side throws it.
//
// compact_rows works on `blocks` blocks of rows (block b starts at base + b * block_stride bytes
// and holds rows_per_block rows of row_bytes bytes) and, in every block, copies row from[i] to
// row to + i for i = 0, 1, ..., n - 1 in that order. With `from` strictly ascending and
// from[i] >= to + i, a destination to + j never holds a source that is still to be read
// (to + j < to + i <= from[i] for j < i), so the in-order copy equals copying every row from the
// block's original contents — what lets the CUDA kernel read before it writes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace selfspec::kernels {

// The most rows one compact_rows call moves per block (an accepted path of a token tree is far
// shorter; the CUDA kernel takes the row list by value, in a fixed-size kernel argument).
inline constexpr std::int64_t kMaxCompactedRows = 64;

// Empty when compact_rows may run with these arguments, else what is wrong (prefixed with
// "compact_rows: ").
inline std::string row_compaction_error(std::int64_t blocks, std::int64_t block_stride,
                                        std::int64_t rows_per_block, std::int64_t row_bytes,
                                        std::span<const std::int32_t> from, std::int64_t to) {
  const auto str = [](std::int64_t value) { return std::to_string(value); };
  const auto n = static_cast<std::int64_t>(from.size());
  if (blocks < 0 || row_bytes <= 0 || rows_per_block <= 0 ||
      block_stride < rows_per_block * row_bytes) {
    return "compact_rows: bad geometry (" + str(blocks) + " blocks of " + str(rows_per_block) +
           " rows of " + str(row_bytes) + " bytes, block stride " + str(block_stride) +
           "; blocks must not overlap)";
  }
  if (n > kMaxCompactedRows) {
    return "compact_rows: " + str(n) + " rows exceed the limit of " + str(kMaxCompactedRows);
  }
  if (to < 0) return "compact_rows: destination row " + str(to) + " is negative";
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = from[static_cast<std::size_t>(i)];
    const std::string where = "compact_rows: from[" + str(i) + "] = " + str(row);
    if (row >= rows_per_block) return where + " is outside the " + str(rows_per_block) + " rows";
    if (row < to + i) return where + " lies before its destination row " + str(to + i);
    if (i > 0 && row <= from[static_cast<std::size_t>(i - 1)]) {
      return where + " does not follow from[" + str(i - 1) +
             "] = " + str(from[static_cast<std::size_t>(i - 1)]) +
             " (the rows must ascend strictly)";
    }
  }
  return {};
}

}  // namespace selfspec::kernels
