#include "model/fixed_partition_projection.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace selfspec {

FixedPartitionProjection::FixedPartitionProjection(Backend& backend, Communicator& comm, int chunks)
    : backend_(backend), comm_(comm), chunks_(chunks) {
  SELFSPEC_CHECK(backend_.host_memory(),
                 "--reduction tp-invariant: the fixed-partition reduction runs on host-memory "
                 "backends (--device cpu) only, not on {}; pass --reduction rank-order there "
                 "(results then depend on the TP degree by rounding)",
                 backend_.description().summary());
  SELFSPEC_CHECK(chunks_ >= 1 && chunks_ % comm_.size() == 0,
                 "--reduction tp-invariant: {} chunks cannot be split over tp = {} ranks", chunks_,
                 comm_.size());
}

FixedPartitionProjection::Weight FixedPartitionProjection::cut(const Matrix& w, std::int64_t units,
                                                               IndexRange shard,
                                                               std::int64_t unit) const {
  const int per_rank = chunks_ / comm_.size();
  const int first = comm_.rank() * per_rank;
  SELFSPEC_CHECK(w.cols == shard.size() * unit,
                 "fixed-partition cut: the weight slice has {} columns, the shard {} units of {}",
                 w.cols, shard.size(), unit);
  SELFSPEC_CHECK(split_range(units, chunks_, first).begin == shard.begin &&
                     split_range(units, chunks_, first + per_rank - 1).end == shard.end,
                 "fixed-partition cut: rank {}'s units [{}, {}) are not a union of the {} chunks",
                 comm_.rank(), shard.begin, shard.end, chunks_);
  Weight out;
  out.out = w.rows;
  out.in_local = w.cols;
  for (int c = first; c < first + per_rank; ++c) {
    const IndexRange range = split_range(units, chunks_, c);
    Chunk chunk;
    chunk.begin = (range.begin - shard.begin) * unit;
    chunk.cols = range.size() * unit;
    if (chunk.cols > 0) {
      chunk.weight.format = w.format;
      chunk.weight.rows = w.rows;
      chunk.weight.cols = chunk.cols;
      chunk.weight.data =
          backend_.select_weight_cols(w.view(), chunk.begin, chunk.begin + chunk.cols);
    }
    out.chunks.push_back(std::move(chunk));
  }
  return out;
}

void FixedPartitionProjection::project(const float* x, std::int64_t n_tokens, const Weight& w,
                                       float* y) {
  const auto block = static_cast<std::size_t>(n_tokens * w.out);
  partials_.assign(w.chunks.size() * block, 0.0f);
  for (std::size_t j = 0; j < w.chunks.size(); ++j) {
    const Chunk& chunk = w.chunks[j];
    if (chunk.cols == 0) continue;  // an empty chunk's partial is +0
    const float* xc = x + chunk.begin;
    if (n_tokens > 1 || chunk.cols != w.in_local) {
      x_chunk_.resize(static_cast<std::size_t>(n_tokens * chunk.cols));
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        std::copy_n(x + t * w.in_local + chunk.begin, chunk.cols, x_chunk_.data() + t * chunk.cols);
      }
      xc = x_chunk_.data();
    }
    backend_.matmul(xc, n_tokens, chunk.weight.view(), partials_.data() + j * block);
  }
  const float* parts = partials_.data();
  if (comm_.size() > 1) {
    gathered_.resize(static_cast<std::size_t>(chunks_) * block);
    const std::vector<std::int64_t> counts(static_cast<std::size_t>(comm_.size()),
                                           static_cast<std::int64_t>(partials_.size()));
    comm_.all_gather(partials_, gathered_, counts);
    parts = gathered_.data();
  }
  for (std::size_t i = 0; i < block; ++i) {
    float sum = parts[i];
    for (int c = 1; c < chunks_; ++c) sum += parts[static_cast<std::size_t>(c) * block + i];
    y[i] = sum;
  }
}

}  // namespace selfspec
