// Host copies of KV-cache rows: see kv_rows.hpp.
#include "model/kv_rows.hpp"

#include "core/error.hpp"

namespace selfspec {

namespace {

// Calls f(pointer to row `begin` of (layer, K or V, head)) in the data's order.
template <typename F>
void for_each_block(const KvCache& kv, std::int64_t begin, F&& f) {
  const auto row_bytes = kv.head_dim() * static_cast<std::int64_t>(kv.element_bytes());
  for (std::int64_t l = 0; l < kv.num_layers(); ++l) {
    for (void* tensor : {kv.keys(l), kv.values(l)}) {
      for (std::int64_t h = 0; h < kv.kv_heads(); ++h) {
        f(static_cast<std::byte*>(tensor) + (h * kv.head_stride() + begin) * row_bytes);
      }
    }
  }
}

}  // namespace

KvRows save_kv_rows(Backend& backend, const KvCache& kv, std::int64_t begin, std::int64_t count) {
  SELFSPEC_CHECK(begin >= 0 && count >= 0 && begin + count <= kv.length(),
                 "KV rows [{}, {}) are not all in the cache (length {})", begin, begin + count,
                 kv.length());
  KvRows rows;
  rows.begin = begin;
  rows.count = count;
  const auto block = static_cast<std::size_t>(count * kv.head_dim()) * kv.element_bytes();
  rows.data.resize(static_cast<std::size_t>(kv.num_layers() * 2 * kv.kv_heads()) * block);
  std::byte* out = rows.data.data();
  for_each_block(kv, begin, [&](const std::byte* src) {
    if (block > 0) backend.download(out, src, block);
    out += block;
  });
  return rows;
}

void restore_kv_rows(Backend& backend, KvCache& kv, const KvRows& rows) {
  SELFSPEC_CHECK(rows.begin + rows.count <= kv.capacity(),
                 "KV rows [{}, {}) exceed the cache's capacity {}", rows.begin,
                 rows.begin + rows.count, kv.capacity());
  const auto block = static_cast<std::size_t>(rows.count * kv.head_dim()) * kv.element_bytes();
  SELFSPEC_CHECK(
      rows.data.size() == static_cast<std::size_t>(kv.num_layers() * 2 * kv.kv_heads()) * block,
      "KV rows were saved from a cache of another geometry");
  const std::byte* in = rows.data.data();
  for_each_block(kv, rows.begin, [&](std::byte* dst) {
    if (block > 0) backend.upload(dst, in, block);
    in += block;
  });
  SELFSPEC_CHECK(kv.length() >= rows.begin,
                 "the KV cache was cut to {} tokens, below the saved "
                 "rows at {}",
                 kv.length(), rows.begin);
  kv.truncate(rows.begin);
  kv.extend(rows.begin + rows.count - kv.length());
}

}  // namespace selfspec
