// compact_rows on the host (kernels/cpu/row_compaction.hpp): one memcpy per moved row, in order
// within a block, block after block. Single-threaded on purpose: a whole model's compaction is
// small (a LLaMA-70B TP-8 shard keeping 8 rows moves 0.66 MB each way, about 24 µs on one core in
// bench/kernels/kernel_bench), and splitting it over core/parallel.hpp's workers measured slower
// (55 µs with 2 threads, milliseconds when the cores are busy: each worker must wake up first).
#include "kernels/cpu/row_compaction.hpp"

#include "core/error.hpp"
#include "kernels/row_compaction_contract.hpp"

#include <cstddef>
#include <cstring>
#include <string>

namespace selfspec::kernels::cpu {
namespace {

// One block, rows in order. Rows are either the same row (nothing to do) or disjoint, so memcpy
// is enough; the order guarantees no source is overwritten before it is read (see the contract).
void compact_block(std::byte* block, std::int64_t row_bytes, std::span<const std::int32_t> from,
                   std::int64_t to) {
  for (std::size_t i = 0; i < from.size(); ++i) {
    const std::int64_t source = from[i];
    const std::int64_t destination = to + static_cast<std::int64_t>(i);
    if (source == destination) continue;
    std::memcpy(block + destination * row_bytes, block + source * row_bytes,
                static_cast<std::size_t>(row_bytes));
  }
}

}  // namespace

void compact_rows(void* base, std::int64_t blocks, std::int64_t block_stride,
                  std::int64_t rows_per_block, std::int64_t row_bytes,
                  std::span<const std::int32_t> from, std::int64_t to) {
  const std::string error =
      row_compaction_error(blocks, block_stride, rows_per_block, row_bytes, from, to);
  if (!error.empty()) fail("{}", error);
  if (blocks == 0 || from.empty()) return;
  SELFSPEC_CHECK(base != nullptr, "compact_rows: null buffer for {} blocks", blocks);
  for (std::int64_t b = 0; b < blocks; ++b) {
    compact_block(static_cast<std::byte*>(base) + b * block_stride, row_bytes, from, to);
  }
}

}  // namespace selfspec::kernels::cpu
