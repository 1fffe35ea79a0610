// compact_rows on the GPU (kernels/cuda/cuda_kernels.hpp), one launch for the whole buffer: every
// thread owns one column lane (16, 4 or 2 bytes, or 1: the widest that divides the row, the block
// stride and the base address; an f32 or bf16 KV cache's rows of 64-256 dims take 16) of
// one block and moves that lane of every listed row itself, so no two threads touch the same
// address and no barrier is needed. Per thread, the rows go in chunks of kChunk: the chunk's
// sources are all loaded into registers, then its destinations stored, chunk after chunk. That
// keeps kChunk loads in flight and is exact: a destination to + j is never a source still to be
// read (kernels/row_compaction_contract.hpp), and a thread's own loads and stores to one address
// stay in program order. The row list travels by value in the kernel arguments (no upload). Rows
// already in place (from[i] == to + i) are neither read nor written. A copy, no arithmetic: the
// same bits as kernels/cpu/row_compaction.hpp.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/row_compaction_contract.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace selfspec::kernels::cuda {
namespace {

using detail::grid_stride_blocks;
using detail::is_aligned;
using detail::require;
using detail::str;

constexpr int kThreads = 128;
constexpr int kChunk = 8;

// The rows to move, by value (256 bytes of kernel arguments).
struct RowList {
  std::int32_t rows[kMaxCompactedRows];
};

// Lane is uint4, unsigned, unsigned short or unsigned char; strides and widths are in lanes.
template <class Lane>
__global__ void compact_rows_kernel(Lane* base, std::int64_t blocks, std::int64_t block_stride,
                                    std::int64_t row_lanes, RowList from, int n, std::int64_t to) {
  const std::int64_t total = blocks * row_lanes;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       index < total; index += step) {
    const std::int64_t block = index / row_lanes;
    Lane* column = base + block * block_stride + (index - block * row_lanes);
    for (int first = 0; first < n; first += kChunk) {
      Lane values[kChunk];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        const int i = first + j;
        if (i < n && from.rows[i] != to + i) values[j] = column[from.rows[i] * row_lanes];
      }
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        const int i = first + j;
        if (i < n && from.rows[i] != to + i) column[(to + i) * row_lanes] = values[j];
      }
    }
  }
}

template <class Lane>
void launch(void* base, std::int64_t blocks, std::int64_t block_stride, std::int64_t row_bytes,
            const RowList& from, int n, std::int64_t to, cudaStream_t stream) {
  constexpr auto kBytes = static_cast<std::int64_t>(sizeof(Lane));
  const std::int64_t row_lanes = row_bytes / kBytes;
  compact_rows_kernel<Lane>
      <<<grid_stride_blocks(blocks * row_lanes, kThreads), kThreads, 0, stream>>>(
          static_cast<Lane*>(base), blocks, block_stride / kBytes, row_lanes, from, n, to);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

// Whether lanes of `bytes` fit rows, block stride and base exactly.
bool lanes_fit(std::int64_t bytes, const void* base, std::int64_t block_stride,
               std::int64_t row_bytes) {
  return row_bytes % bytes == 0 && block_stride % bytes == 0 &&
         is_aligned(base, static_cast<std::size_t>(bytes));
}

}  // namespace

void compact_rows(void* base, std::int64_t blocks, std::int64_t block_stride,
                  std::int64_t rows_per_block, std::int64_t row_bytes,
                  std::span<const std::int32_t> from, std::int64_t to, cudaStream_t stream) {
  const std::string error =
      row_compaction_error(blocks, block_stride, rows_per_block, row_bytes, from, to);
  require(error.empty(), error);
  if (blocks == 0 || from.empty()) return;
  require(base != nullptr, "compact_rows: null buffer for " + str(blocks) + " blocks");
  RowList rows{};
  for (std::size_t i = 0; i < from.size(); ++i) rows.rows[i] = from[i];
  const auto n = static_cast<int>(from.size());
  if (lanes_fit(16, base, block_stride, row_bytes)) {
    launch<uint4>(base, blocks, block_stride, row_bytes, rows, n, to, stream);
  } else if (lanes_fit(4, base, block_stride, row_bytes)) {
    launch<unsigned>(base, blocks, block_stride, row_bytes, rows, n, to, stream);
  } else if (lanes_fit(2, base, block_stride, row_bytes)) {
    launch<unsigned short>(base, blocks, block_stride, row_bytes, rows, n, to, stream);
  } else {
    launch<unsigned char>(base, blocks, block_stride, row_bytes, rows, n, to, stream);
  }
}

}  // namespace selfspec::kernels::cuda
