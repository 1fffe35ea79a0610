// A host copy of some KV-cache rows, to put back later: drafters and searches that score a
// candidate plan over tokens already in the cache (SWIFT §4.1's matchness: one parallel draft
// forward over the last γ committed tokens, reusing the target's cached K/V before them) must
// overwrite those tokens' rows with the draft's K/V and then restore the target's. The rows
// [begin, begin + count) of every layer's K and V, for every KV head of this rank.
#pragma once

#include "backend/backend.hpp"
#include "model/kv_cache.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace selfspec {

struct KvRows {
  std::int64_t begin = 0;
  std::int64_t count = 0;
  // [layer][K, V][kv_head][count][head_dim] elements of the cache's dtype, as bytes.
  std::vector<std::byte> data;
};

// Copies rows [begin, begin + count) (all below kv.length()) to the host.
KvRows save_kv_rows(Backend& backend, const KvCache& kv, std::int64_t begin, std::int64_t count);

// Writes the rows back and sets the cache's length to rows.begin + rows.count: the cache is as it
// was when the rows were saved, whatever forwards ran in between (at or after rows.begin).
void restore_kv_rows(Backend& backend, KvCache& kv, const KvRows& rows);

}  // namespace selfspec
