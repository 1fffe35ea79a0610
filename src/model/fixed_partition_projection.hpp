// A row-parallel projection y = x · Wᵀ (o_proj, down_proj) whose sum over the input columns has
// the same order at every tensor-parallel degree (ReductionOrder::kTpInvariant,
// model/reduction_order.hpp). Issue 11 asks for exit-layer training data that is identical bit
// for bit at TP 1 and TP > 1; with the usual all-reduce it is not, because each rank first sums
// its whole column slice and the ranks' partial sums are then added, and float addition is not
// associative.
//
// The fixed partition: the input dimension, counted in units (a query head's head_dim columns
// for o_proj, one feature for down_proj), is cut into P chunks, chunk c = split_range(units, P, c)
// (model/shard_plan.hpp). Rank r of tp owns chunks [r·P/tp, (r+1)·P/tp), whose union is exactly
// its shard: split_range starts part p at floor(p·units/parts), and
// floor((r·P/tp)·units/P) = floor(r·units/tp). Each chunk's partial product x_c · W_cᵀ is one
// matmul over its columns in the kernels' canonical order (kernels/cpu/matmul.hpp); the P partials
// are all-gathered (rank order is chunk order) and added c = 0, 1, ..., P-1 on every rank. Every
// TP degree computes the same P matmuls and the same P - 1 additions, so y is the same bits at
// TP 1 and at any tp dividing P.
//
// Cost: the chunks are copies of the rank's weight slice cut into column blocks (made once, at
// the model's load), and each collective moves P/tp partial rows per rank instead of one. Host-
// memory backends only: the chunk copies of x and the ordered sum run on the host.
#pragma once

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "model/llama_weights.hpp"
#include "model/shard_plan.hpp"

#include <cstdint>
#include <vector>

namespace selfspec {

class FixedPartitionProjection {
 public:
  // One of this rank's chunks: its local columns [begin, begin + cols) and their weight block.
  struct Chunk {
    std::int64_t begin = 0;
    std::int64_t cols = 0;
    Matrix weight;  // [out × cols]; empty when cols == 0
  };
  // A rank's weight slice [out × in_local] cut into its P/tp chunks.
  struct Weight {
    std::int64_t out = 0;
    std::int64_t in_local = 0;
    std::vector<Chunk> chunks;
  };

  // chunks: P. Throws unless the backend's buffers live in host memory and the communicator's
  // size divides P.
  FixedPartitionProjection(Backend& backend, Communicator& comm, int chunks);

  // Cuts this rank's slice w [out × shard.size()·unit] of a weight whose input dimension holds
  // `units` units of `unit` columns, the rank owning units [shard.begin, shard.end).
  Weight cut(const Matrix& w, std::int64_t units, IndexRange shard, std::int64_t unit) const;

  // y [T × out] = Σ over c = 0..P-1, in that order, of x[:, chunk c] · W_cᵀ; x is this rank's
  // [T × in_local] activations. The same bits on every rank and at every TP degree dividing P.
  void project(const float* x, std::int64_t n_tokens, const Weight& w, float* y);

 private:
  Backend& backend_;
  Communicator& comm_;
  int chunks_;
  std::vector<float> x_chunk_;   // [T × cols] of one chunk
  std::vector<float> partials_;  // [P/tp × T × out], this rank's chunks
  std::vector<float> gathered_;  // [P × T × out], every chunk in chunk order
};

}  // namespace selfspec
