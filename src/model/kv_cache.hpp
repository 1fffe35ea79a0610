// The per-rank KV cache in backend memory: for every layer, K and V as
// [kv_heads][capacity][head_dim] f32, one contiguous sequence. A forward pass writes its T tokens
// at slots [length, length + T) and then extends the length; rollback after a rejected draft is
// truncate(n) — a length change, never a copy. Slots past the length hold stale data that the
// next forward overwrites. Tree verification keeps the accepted path's rows with keep_rows: one
// backend operation moving those slots down in every layer's K and V.
//
// A region (region()) is a cache of its own over slots [first, first + capacity) of another
// cache's storage: its own length, truncate and keep_rows, its heads head_stride() slots apart
// (the owner's capacity). The batched speculative loop (decode/speculative_batch.hpp) gives each
// sequence one, so that a sequence's run reads and rolls back its region exactly as a run over a
// cache of its own, while the batch's forwards write every region of the owner at once (KvSegment).
#pragma once

#include "backend/backend.hpp"

#include <cstdint>
#include <span>

namespace selfspec {

class KvCache {
 public:
  KvCache(Backend& backend, std::int64_t num_layers, std::int64_t kv_heads, std::int64_t head_dim,
          std::int64_t capacity);

  std::int64_t length() const { return length_; }
  std::int64_t capacity() const { return capacity_; }
  // Slots from one KV head's rows to the next (capacity() unless this is a region).
  std::int64_t head_stride() const { return head_stride_; }
  // Slots [first_slot, first_slot + capacity) of this cache as a cache of its own, empty, sharing
  // this cache's storage (which must outlive it). Throws unless the slots are inside this cache.
  KvCache region(std::int64_t first_slot, std::int64_t capacity) const;
  // For a region of `owner`: its first slot there.
  std::int64_t first_slot_in(const KvCache& owner) const;
  std::int64_t num_layers() const { return num_layers_; }
  std::int64_t kv_heads() const { return kv_heads_; }
  std::int64_t head_dim() const { return head_dim_; }

  // Drops every slot at or after `length` (length <= length()). Throws otherwise.
  void truncate(std::int64_t length);
  // Marks `count` more slots as filled (called by the forward pass after writing them).
  void extend(std::int64_t count);
  void clear() { length_ = 0; }
  // Tree verification keeps the accepted path's rows: slot from[i] moves to slot to + i in every
  // layer's K and V of every KV head (one Backend::compact_rows), then the length becomes
  // to + from.size(). `from` ascends strictly with from[i] >= to + i and from[i] < length(), at
  // most kernels::kMaxCompactedRows slots; throws otherwise (the cache unchanged).
  void keep_rows(Backend& backend, std::int64_t to, std::span<const std::int32_t> from);

  // K or V of one layer in backend memory: [kv_heads][capacity][head_dim].
  float* keys(std::int64_t layer) { return base() + layer_offset(layer); }
  float* values(std::int64_t layer) { return base() + layer_offset(layer) + per_tensor_; }
  const float* keys(std::int64_t layer) const { return base() + layer_offset(layer); }
  const float* values(std::int64_t layer) const {
    return base() + layer_offset(layer) + per_tensor_;
  }

  // Bytes held by the cache (0 for a region: its owner holds them).
  std::uint64_t bytes() const { return storage_.bytes(); }
  // Bytes a cache of this geometry needs (for planning before allocation).
  static std::uint64_t bytes_for(std::int64_t num_layers, std::int64_t kv_heads,
                                 std::int64_t head_dim, std::int64_t capacity);

 private:
  KvCache(const KvCache& owner, std::int64_t first_slot, std::int64_t capacity);
  float* base() const { return base_; }
  std::size_t layer_offset(std::int64_t layer) const {
    return static_cast<std::size_t>(layer) * 2 * per_tensor_;
  }
  std::int64_t num_layers_;
  std::int64_t kv_heads_;
  std::int64_t head_dim_;
  std::int64_t capacity_;
  std::int64_t head_stride_;
  std::size_t per_tensor_;  // floats of one layer's K (or V): kv_heads × head_stride × head_dim
  std::int64_t length_ = 0;
  DeviceBuffer storage_;  // empty for a region
  float* base_ = nullptr;
};

}  // namespace selfspec
