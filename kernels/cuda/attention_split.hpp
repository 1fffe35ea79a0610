// How the CUDA attention (attention.cu) cuts one query's visible slots into splits: pure
// arithmetic shared by the kernels (`__host__ __device__` under nvcc) and the host (grid and
// workspace sizing, CPU unit tests).
//
// A query's visible slots, in ascending slot order, are numbered by rank 0 .. n_visible - 1: the
// cache's past slots [0, n_past) first (rank = slot), then the new slots its mask allows. Ranks
// are cut into splits of attention_split_slots(n_visible) consecutive ranks. The split size is a
// function of n_visible alone, a multiple of kAttentionMinSplit, and makes at most
// kAttentionMaxSplits splits, so the split a key falls in, its place inside the split and the
// merge order are the same for a query alone, in a batch, or as a tree node whose ancestors sit
// at other slots: what the attention output is computed from does not depend on where it runs.
#pragma once

#include "kernels/host_device.hpp"

#include <cstdint>

namespace selfspec::kernels::cuda {

// Ranks per split at short context (4 warps × 8 slots per round) and the most splits of a query.
inline constexpr std::int64_t kAttentionMinSplit = 32;
inline constexpr std::int64_t kAttentionMaxSplits = 64;

// Ranks per split for a query that sees n_visible slots (> 0).
SELFSPEC_HOST_DEVICE inline std::int64_t attention_split_slots(std::int64_t n_visible) {
  const std::int64_t per_split = (n_visible + kAttentionMaxSplits - 1) / kAttentionMaxSplits;
  const std::int64_t rounded =
      (per_split + kAttentionMinSplit - 1) / kAttentionMinSplit * kAttentionMinSplit;
  return rounded < kAttentionMinSplit ? kAttentionMinSplit : rounded;
}

// Splits of a query that sees n_visible slots (0 when it sees none).
SELFSPEC_HOST_DEVICE inline std::int64_t attention_splits(std::int64_t n_visible) {
  if (n_visible <= 0) return 0;
  const std::int64_t size = attention_split_slots(n_visible);
  return (n_visible + size - 1) / size;
}

// The most splits of any query over a cache of `capacity` slots (the grid's splits per query):
// attention_splits(n) <= ceil(n / kAttentionMinSplit) and <= kAttentionMaxSplits for every n.
SELFSPEC_HOST_DEVICE inline std::int64_t attention_grid_splits(std::int64_t capacity) {
  const std::int64_t by_size = (capacity + kAttentionMinSplit - 1) / kAttentionMinSplit;
  const std::int64_t splits = by_size < kAttentionMaxSplits ? by_size : kAttentionMaxSplits;
  return splits < 1 ? 1 : splits;
}

}  // namespace selfspec::kernels::cuda
