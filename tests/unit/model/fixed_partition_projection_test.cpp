// The fixed-partition projection (model/fixed_partition_projection.hpp) on one rank: its result is
// the chunks' canonical dot products added in chunk order, bit for bit (what makes it the same at
// every TP degree), close to the exact product, for f32 and bf16 weights, several token counts,
// and partitions with empty chunks; and the partition nests every TP degree's shards, the claim
// the multi-rank equality rests on (tensor_parallel_test checks that equality under mpirun).
#include "model/fixed_partition_projection.hpp"
#include "comm/local_comm.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "kernels/cpu/matmul.hpp"
#include "tests/support/model_fixture.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace selfspec::testing {
namespace {

struct Case {
  std::int64_t out;
  std::int64_t units;
  std::int64_t unit;
  int chunks;
  std::int64_t tokens;
  DType dtype;
};

// A weight made from row-major host bytes [rows x cols] (the backend's own layout).
Matrix make_matrix(Backend& backend, std::int64_t rows, std::int64_t cols, DType dtype,
                   const std::vector<std::byte>& bytes) {
  Matrix m;
  m.format = dense_format(dtype);
  m.rows = rows;
  m.cols = cols;
  m.data = backend.make_weight({m.format, rows, cols, bytes.data(), 0, 0});
  return m;
}

Matrix upload_matrix(Backend& backend, std::int64_t rows, std::int64_t cols, DType dtype,
                     std::vector<float>& values, std::vector<std::byte>& bytes, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  values.resize(static_cast<std::size_t>(rows * cols));
  bytes.assign(values.size() * dtype_size(dtype), std::byte{0});
  for (std::size_t i = 0; i < values.size(); ++i) {
    float v = normal(rng);
    if (dtype == DType::kBF16) {
      const std::uint16_t b = f32_to_bf16(v);
      v = bf16_to_f32(b);
      std::memcpy(bytes.data() + i * 2, &b, 2);
    } else {
      std::memcpy(bytes.data() + i * 4, &v, 4);
    }
    values[i] = v;
  }
  return make_matrix(backend, rows, cols, dtype, bytes);
}

class FixedPartition : public ::testing::TestWithParam<Case> {};

TEST_P(FixedPartition, EqualsChunkDotsAddedInChunkOrder) {
  const Case& c = GetParam();
  Backend& backend = cpu_backend();
  LocalComm comm;
  std::mt19937 rng(7);
  const std::int64_t k = c.units * c.unit;
  std::vector<float> w_values;
  std::vector<std::byte> w_bytes;
  const Matrix w = upload_matrix(backend, c.out, k, c.dtype, w_values, w_bytes, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(c.tokens * k));
  for (float& v : x) v = normal(rng);

  FixedPartitionProjection projection(backend, comm, c.chunks);
  const FixedPartitionProjection::Weight cut = projection.cut(w, c.units, {0, c.units}, c.unit);
  ASSERT_EQ(cut.chunks.size(), static_cast<std::size_t>(c.chunks));
  std::vector<float> y(static_cast<std::size_t>(c.tokens * c.out));
  projection.project(x.data(), c.tokens, cut, y.data());

  // The same arithmetic written out: each chunk's product on its own (a matrix of the chunk's
  // columns, one token at a time: the kernel's canonical order), then the chunks left to right.
  const std::size_t element = dtype_size(c.dtype);
  std::vector<Matrix> chunk_weights;
  for (int chunk = 0; chunk < c.chunks; ++chunk) {
    const IndexRange r = split_range(c.units, c.chunks, chunk);
    const std::int64_t cols = r.size() * c.unit;
    std::vector<std::byte> block(static_cast<std::size_t>(c.out * cols) * element);
    for (std::int64_t n = 0; n < c.out && cols > 0; ++n) {
      std::memcpy(block.data() + static_cast<std::size_t>(n * cols) * element,
                  w_bytes.data() + static_cast<std::size_t>(n * k + r.begin * c.unit) * element,
                  static_cast<std::size_t>(cols) * element);
    }
    chunk_weights.push_back(cols > 0 ? make_matrix(backend, c.out, cols, c.dtype, block)
                                     : Matrix{});
  }
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    for (std::int64_t n = 0; n < c.out; ++n) {
      float sum = 0.0f;
      double exact = 0.0;
      for (int chunk = 0; chunk < c.chunks; ++chunk) {
        const IndexRange r = split_range(c.units, c.chunks, chunk);
        const std::int64_t begin = r.begin * c.unit;
        const std::int64_t cols = r.size() * c.unit;
        float partial = 0.0f;
        if (cols > 0) {
          std::vector<float> column_out(static_cast<std::size_t>(c.out));
          backend.matmul(x.data() + t * k + begin, 1,
                         chunk_weights[static_cast<std::size_t>(chunk)].view(), column_out.data());
          partial = column_out[static_cast<std::size_t>(n)];
        }
        sum = chunk == 0 ? partial : sum + partial;
        for (std::int64_t j = begin; j < begin + cols; ++j) {
          // bf16 weights multiply bf16 activations (kernels/cpu/bf16_matmul.hpp).
          const float xj = x[static_cast<std::size_t>(t * k + j)];
          const float xr = c.dtype == DType::kBF16 ? bf16_to_f32(f32_to_bf16(xj)) : xj;
          exact += static_cast<double>(xr) * w_values[static_cast<std::size_t>(n * k + j)];
        }
      }
      const float got = y[static_cast<std::size_t>(t * c.out + n)];
      ASSERT_EQ(std::memcmp(&got, &sum, sizeof(float)), 0)
          << "token " << t << " row " << n << ": " << got << " vs " << sum;
      EXPECT_NEAR(got, exact, 1e-4 * (1.0 + std::abs(exact)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FixedPartition,
    ::testing::Values(Case{16, 8, 16, 8, 1, DType::kF32},    // o_proj: a head per chunk, decode
                      Case{24, 4, 40, 4, 3, DType::kBF16},   // several tokens, bf16
                      Case{32, 100, 1, 8, 5, DType::kF32},   // down_proj, uneven chunks
                      Case{8, 5, 1, 8, 2, DType::kF32},      // fewer units than chunks: empty ones
                      Case{12, 300, 1, 12, 1, DType::kBF16}  // Qwen's P = 12
                      ),
    [](const auto& test_info) { return "case" + std::to_string(test_info.index); });

TEST(FixedPartitionLayout, ChunksNestEveryTpDegreesShards) {
  for (std::int64_t units = 1; units <= 130; ++units) {
    for (int chunks = 1; chunks <= 16; ++chunks) {
      for (int tp = 1; tp <= chunks; ++tp) {
        if (chunks % tp != 0) continue;
        const int per_rank = chunks / tp;
        for (int rank = 0; rank < tp; ++rank) {
          const IndexRange shard = split_range(units, tp, rank);
          ASSERT_EQ(split_range(units, chunks, rank * per_rank).begin, shard.begin)
              << units << " units, " << chunks << " chunks, tp " << tp << " rank " << rank;
          ASSERT_EQ(split_range(units, chunks, (rank + 1) * per_rank - 1).end, shard.end)
              << units << " units, " << chunks << " chunks, tp " << tp << " rank " << rank;
        }
      }
    }
  }
}

TEST(FixedPartitionLayout, RefusesAShardThatIsNotAUnionOfChunks) {
  Backend& backend = cpu_backend();
  LocalComm comm;
  std::mt19937 rng(1);
  std::vector<float> values;
  std::vector<std::byte> bytes;
  const Matrix w = upload_matrix(backend, 4, 6, DType::kF32, values, bytes, rng);
  FixedPartitionProjection projection(backend, comm, 2);
  EXPECT_THROW(projection.cut(w, 8, {0, 6}, 1), Error);  // the rank's 6 of 8 units
  EXPECT_THROW(projection.cut(w, 6, {0, 6}, 2), Error);  // 12 columns claimed, 6 stored
}

}  // namespace
}  // namespace selfspec::testing
