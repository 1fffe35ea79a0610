// Moving kept rows down within blocks of rows: how a KV cache keeps the accepted path of a
// verified token tree (src/model/kv_cache.hpp, KvCache::keep_rows). The contract (row limit and
// argument check) is kernels/row_compaction_contract.hpp, shared with the CUDA kernel.
#pragma once

#include <cstdint>
#include <span>

namespace selfspec::kernels::cpu {

// For every block b < blocks (block b starts at base + b * block_stride bytes and holds
// rows_per_block rows of row_bytes bytes): row to + i = row from[i] for i = 0, 1, ... in that
// order. `from` ascends strictly, from[i] >= to + i, from[i] < rows_per_block, at most
// kMaxCompactedRows rows, blocks do not overlap; throws naming the bad argument otherwise. A copy,
// no arithmetic: every backend gives the same bits.
void compact_rows(void* base, std::int64_t blocks, std::int64_t block_stride,
                  std::int64_t rows_per_block, std::int64_t row_bytes,
                  std::span<const std::int32_t> from, std::int64_t to);

}  // namespace selfspec::kernels::cpu
