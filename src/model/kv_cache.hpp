// The per-rank KV cache in backend memory: for every layer, K and V as
// [kv_heads][capacity][head_dim] elements of the cache's dtype, one contiguous sequence. The dtype
// is f32 (the exact reference) or bf16 (half the bytes that attention reads; every written value
// rounded to nearest even, backend.hpp's KvLayer). A forward pass writes its T tokens
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

#include <cstddef>
#include <cstdint>
#include <span>

namespace selfspec {

class KvCache {
 public:
  // Throws unless dtype is f32 or bf16.
  KvCache(Backend& backend, std::int64_t num_layers, std::int64_t kv_heads, std::int64_t head_dim,
          std::int64_t capacity, DType dtype = DType::kF32);

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
  DType dtype() const { return dtype_; }
  std::size_t element_bytes() const { return dtype_size(dtype_); }

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

  // K or V of one layer in backend memory: [kv_heads][head_stride][head_dim] elements of dtype().
  void* keys(std::int64_t layer) const { return base_ + layer_offset(layer); }
  void* values(std::int64_t layer) const { return base_ + layer_offset(layer) + tensor_bytes_; }
  // The same as f32 elements, for tests and host-side references; throws for a bf16 cache.
  float* f32_keys(std::int64_t layer) const { return as_f32(keys(layer)); }
  float* f32_values(std::int64_t layer) const { return as_f32(values(layer)); }
  // Both, as the backend's ops take them.
  KvLayer layer(std::int64_t layer) const {
    return {keys(layer), values(layer), dtype_, head_stride_};
  }

  // Bytes held by the cache (0 for a region: its owner holds them).
  std::uint64_t bytes() const { return storage_.bytes(); }
  // Bytes a cache of this geometry needs (for planning before allocation).
  static std::uint64_t bytes_for(std::int64_t num_layers, std::int64_t kv_heads,
                                 std::int64_t head_dim, std::int64_t capacity,
                                 DType dtype = DType::kF32);

 private:
  KvCache(const KvCache& owner, std::int64_t first_slot, std::int64_t capacity);
  float* as_f32(void* tensor) const;
  std::size_t layer_offset(std::int64_t layer) const {
    return static_cast<std::size_t>(layer) * 2 * tensor_bytes_;
  }
  std::int64_t num_layers_;
  std::int64_t kv_heads_;
  std::int64_t head_dim_;
  std::int64_t capacity_;
  std::int64_t head_stride_;
  DType dtype_;
  std::size_t tensor_bytes_;  // one layer's K (or V): kv_heads × head_stride × head_dim elements
  std::int64_t length_ = 0;
  DeviceBuffer storage_;  // empty for a region
  std::byte* base_ = nullptr;
};

}  // namespace selfspec
