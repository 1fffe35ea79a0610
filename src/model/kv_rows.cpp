// Host copies of KV-cache rows: see kv_rows.hpp.
#include "model/kv_rows.hpp"

#include "core/error.hpp"

namespace selfspec {

namespace {

// Calls f(pointer to row `begin` of (layer, K or V, head), block floats) in the data's order.
template <typename Kv, typename F>
void for_each_block(Kv& kv, std::int64_t begin, F&& f) {
  for (std::int64_t l = 0; l < kv.num_layers(); ++l) {
    for (auto* tensor : {kv.keys(l), kv.values(l)}) {
      for (std::int64_t h = 0; h < kv.kv_heads(); ++h) {
        f(tensor + (h * kv.head_stride() + begin) * kv.head_dim());
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
  const auto block = static_cast<std::size_t>(count * kv.head_dim());
  rows.data.resize(static_cast<std::size_t>(kv.num_layers() * 2 * kv.kv_heads()) * block);
  float* out = rows.data.data();
  for_each_block(kv, begin, [&](const float* src) {
    if (block > 0) backend.download(out, src, block * sizeof(float));
    out += block;
  });
  return rows;
}

void restore_kv_rows(Backend& backend, KvCache& kv, const KvRows& rows) {
  SELFSPEC_CHECK(rows.begin + rows.count <= kv.capacity(),
                 "KV rows [{}, {}) exceed the cache's capacity {}", rows.begin,
                 rows.begin + rows.count, kv.capacity());
  const auto block = static_cast<std::size_t>(rows.count * kv.head_dim());
  SELFSPEC_CHECK(
      rows.data.size() == static_cast<std::size_t>(kv.num_layers() * 2 * kv.kv_heads()) * block,
      "KV rows were saved from a cache of another geometry");
  const float* in = rows.data.data();
  for_each_block(kv, rows.begin, [&](float* dst) {
    if (block > 0) backend.upload(dst, in, block * sizeof(float));
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
