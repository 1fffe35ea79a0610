// compact_rows on the host (kernels/cpu/row_compaction.hpp): one memcpy per moved row, in order
// within a block; blocks are disjoint, so they are split over the worker threads
// (core/parallel.hpp) in chunks of at least kGrainBytes moved — a whole model's cache (layers x K/V
// x KV heads blocks) is a few hundred kilobytes of scattered rows, worth a few threads but not one
// per block.
#include "kernels/cpu/row_compaction.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/row_compaction_contract.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace selfspec::kernels::cpu {
namespace {

constexpr std::int64_t kGrainBytes = std::int64_t{128} << 10;

// One block, rows in order. Rows are either the same row (nothing to do) or disjoint, so memcpy
// is enough; the order guarantees no source is overwritten before it is read (see the contract).
void compact_block(float* block, std::int64_t row_floats, std::span<const std::int32_t> from,
                   std::int64_t to) {
  const auto row_bytes = static_cast<std::size_t>(row_floats) * sizeof(float);
  for (std::size_t i = 0; i < from.size(); ++i) {
    const std::int64_t source = from[i];
    const std::int64_t destination = to + static_cast<std::int64_t>(i);
    if (source == destination) continue;
    std::memcpy(block + destination * row_floats, block + source * row_floats, row_bytes);
  }
}

}  // namespace

void compact_rows(float* base, std::int64_t blocks, std::int64_t block_stride,
                  std::int64_t rows_per_block, std::int64_t row_floats,
                  std::span<const std::int32_t> from, std::int64_t to) {
  const std::string error =
      row_compaction_error(blocks, block_stride, rows_per_block, row_floats, from, to);
  if (!error.empty()) fail("{}", error);
  if (blocks == 0 || from.empty()) return;
  SELFSPEC_CHECK(base != nullptr, "compact_rows: null buffer for {} blocks", blocks);
  const std::int64_t bytes_per_block = static_cast<std::int64_t>(from.size()) * row_floats *
                                       static_cast<std::int64_t>(sizeof(float));
  const std::int64_t grain = std::max<std::int64_t>(1, kGrainBytes / bytes_per_block);
  parallel_for(blocks, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t b = begin; b < end; ++b) {
      compact_block(base + b * block_stride, row_floats, from, to);
    }
  });
}

}  // namespace selfspec::kernels::cpu
