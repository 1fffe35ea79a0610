#include "model/kv_cache.hpp"

#include "core/error.hpp"

namespace selfspec {

KvCache::KvCache(Backend& backend, std::int64_t num_layers, std::int64_t kv_heads,
                 std::int64_t head_dim, std::int64_t capacity, DType dtype)
    : num_layers_(num_layers),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      capacity_(capacity),
      head_stride_(capacity),
      dtype_(dtype),
      tensor_bytes_(static_cast<std::size_t>(kv_heads * capacity * head_dim) * dtype_size(dtype)) {
  SELFSPEC_CHECK(num_layers > 0 && kv_heads > 0 && head_dim > 0 && capacity > 0,
                 "invalid KV cache geometry: {} layers, {} KV heads, head_dim {}, capacity {}",
                 num_layers, kv_heads, head_dim, capacity);
  SELFSPEC_CHECK(dtype == DType::kF32 || dtype == DType::kBF16,
                 "a KV cache of {}: the KV cache holds f32 or bf16", dtype_name(dtype));
  storage_ = backend.allocate(bytes_for(num_layers, kv_heads, head_dim, capacity, dtype));
  base_ = storage_.as<std::byte>();
}

KvCache::KvCache(const KvCache& owner, std::int64_t first_slot, std::int64_t capacity)
    : num_layers_(owner.num_layers_),
      kv_heads_(owner.kv_heads_),
      head_dim_(owner.head_dim_),
      capacity_(capacity),
      head_stride_(owner.head_stride_),
      dtype_(owner.dtype_),
      tensor_bytes_(owner.tensor_bytes_),
      base_(owner.base_ +
            static_cast<std::size_t>(first_slot * owner.head_dim_) * owner.element_bytes()) {}

KvCache KvCache::region(std::int64_t first_slot, std::int64_t capacity) const {
  SELFSPEC_CHECK(first_slot >= 0 && capacity > 0 && first_slot + capacity <= capacity_,
                 "KV cache region [{}, {}) is outside the cache's {} slots", first_slot,
                 first_slot + capacity, capacity_);
  return KvCache(*this, first_slot, capacity);
}

std::int64_t KvCache::first_slot_in(const KvCache& owner) const {
  const std::ptrdiff_t row_bytes = head_dim_ * static_cast<std::ptrdiff_t>(element_bytes());
  const std::ptrdiff_t bytes = base_ - owner.base_;
  SELFSPEC_CHECK(head_stride_ == owner.head_stride_ && dtype_ == owner.dtype_ && bytes >= 0 &&
                     bytes % row_bytes == 0 && bytes / row_bytes + capacity_ <= owner.capacity_,
                 "this KV cache is not a region of the given cache");
  return bytes / row_bytes;
}

float* KvCache::as_f32(void* tensor) const {
  SELFSPEC_CHECK(dtype_ == DType::kF32, "a {} KV cache read as f32", dtype_name(dtype_));
  return static_cast<float*>(tensor);
}

void KvCache::truncate(std::int64_t length) {
  SELFSPEC_CHECK(length >= 0 && length <= length_,
                 "KV cache truncate to {} is outside [0, {}] (the current length)", length,
                 length_);
  length_ = length;
}

void KvCache::extend(std::int64_t count) {
  SELFSPEC_CHECK(count >= 0 && length_ + count <= capacity_,
                 "KV cache overflow: {} + {} slots exceed the capacity of {}", length_, count,
                 capacity_);
  length_ += count;
}

void KvCache::keep_rows(Backend& backend, std::int64_t to, std::span<const std::int32_t> from) {
  SELFSPEC_CHECK(to >= 0 && to <= length_,
                 "KV cache keep_rows: destination slot {} is outside [0, {}] (the current length)",
                 to, length_);
  for (std::size_t i = 0; i < from.size(); ++i) {
    SELFSPEC_CHECK(from[i] < length_,
                   "KV cache keep_rows: from[{}] = {} is at or past the current length {}", i,
                   from[i], length_);
  }
  // [layer][K, V][kv_head] blocks of [capacity][head_dim], head_stride slots apart.
  const auto row_bytes = head_dim_ * static_cast<std::int64_t>(element_bytes());
  backend.compact_rows(base_, num_layers_ * 2 * kv_heads_, head_stride_ * row_bytes, capacity_,
                       row_bytes, from, to);
  length_ = to + static_cast<std::int64_t>(from.size());
}

std::uint64_t KvCache::bytes_for(std::int64_t num_layers, std::int64_t kv_heads,
                                 std::int64_t head_dim, std::int64_t capacity, DType dtype) {
  return static_cast<std::uint64_t>(num_layers) * 2 * static_cast<std::uint64_t>(kv_heads) *
         static_cast<std::uint64_t>(capacity) * static_cast<std::uint64_t>(head_dim) *
         dtype_size(dtype);
}

}  // namespace selfspec
