#include "backend/shard_reductions.hpp"

#include "backend/backend.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace selfspec {

void ShardReductions::set_rows(const LogitRows& rows) {
  SELFSPEC_CHECK(rows.device == device_resident(),
                 "logit rows in {} memory given to the {} shard reductions",
                 rows.device ? "device" : "host", name());
  SELFSPEC_CHECK(rows.rows == 0 || rows.width == vocab_local(),
                 "logit rows of {} values for a shard of {}", rows.width, vocab_local());
  SELFSPEC_CHECK(rows.rows >= 0 && (rows.rows == 0 || rows.data != nullptr),
                 "logit rows: {} rows at a null pointer", rows.rows);
  rows_ = rows.data;
  n_rows_ = rows.rows;
  rows_changed();
}

std::vector<ShardStats> ShardReductions::gather_stats(Communicator& comm, double inv_temperature,
                                                      RowNeeds needs) {
  const auto n = static_cast<std::size_t>(n_rows_);
  const auto ranks = static_cast<std::size_t>(comm.size());
  ShardStats* mine = record_buffer(0, n);
  compute_stats(inv_temperature, needs, mine);
  std::vector<ShardStats> all;
  if (ranks > 1 && exchanges_on_device(comm)) {
    ShardStats* everyone = record_buffer(1, n * ranks);
    comm.all_gather_bytes_device(mine, everyone, n * sizeof(ShardStats), stream());
    // Every rank waits for the exchange (the fetch), so a failed peer surfaces here.
    all.resize(n * ranks);
    fetch(all.data(), everyone, all.size());
    if (!comm.is_root()) all.clear();
    return all;
  }
  std::vector<ShardStats> host(n);
  fetch(host.data(), mine, n);
  all.resize(comm.is_root() ? n * ranks : 0);
  comm.gather_records<ShardStats>(host, all, 0);
  return all;
}

std::vector<float> ShardReductions::gather_rows(Communicator& comm) {
  const std::vector<std::int64_t>& counts = shard_.counts;
  const auto ranks = static_cast<std::size_t>(comm.size());
  SELFSPEC_CHECK(counts.size() == ranks, "a vocab split over {} ranks on {} ranks", counts.size(),
                 ranks);
  std::vector<float> all;
  if (ranks > 1 && exchanges_on_device(comm)) {
    const std::int64_t pitch = *std::max_element(counts.begin(), counts.end());
    const auto block = static_cast<std::size_t>(n_rows_ * pitch);
    float* mine = float_buffer(0, block);
    pack_rows(mine, pitch);
    float* everyone = float_buffer(1, block * ranks);
    comm.all_gather_bytes_device(mine, everyone, block * sizeof(float), stream());
    if (!comm.is_root()) {
      float first = 0.0f;  // waits for the exchange, so a failed peer surfaces here
      fetch_floats(&first, everyone, 1);
      return all;
    }
    std::vector<float> padded(block * ranks);
    fetch_floats(padded.data(), everyone, padded.size());
    for (std::size_t s = 0; s < ranks; ++s) {
      for (std::int64_t r = 0; r < n_rows_; ++r) {
        const auto* from = padded.data() + s * block + static_cast<std::size_t>(r * pitch);
        all.insert(all.end(), from, from + counts[s]);
      }
    }
    return all;
  }
  const std::span<const float> mine = host_rows();
  std::vector<std::int64_t> sizes(ranks);
  for (std::size_t s = 0; s < ranks; ++s) sizes[s] = counts[s] * n_rows_;
  all.resize(comm.is_root() ? static_cast<std::size_t>(
                                  std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}))
                            : 0);
  comm.gather(mine, all, sizes, 0);
  return all;
}

}  // namespace selfspec
