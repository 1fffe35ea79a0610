// The tensor-core GEMV's weight pipelines (kernels/cuda/matmul_tensor_core.hpp's TensorPipeline):
// the ping-pong and the bulk copies consume the same chunks in the same order with the same
// arithmetic as the ring, so they must give the ring's bits exactly - for one matrix, several in
// one launch, the SwiGLU pair, every tile size (1 .. 64 tokens), vector and scalar loads (the bulk
// pipeline falls back to the ring's loads for the latter), blocks past the last row, one stage
// and more stages than are in flight, columns that end inside a stage or a chunk.
#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cuda/matmul_tensor_core.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

using detail::TensorPipeline;

constexpr TensorPipeline kOtherPipelines[] = {TensorPipeline::kPingPong, TensorPipeline::kBulk};

std::string pipeline_name(TensorPipeline pipeline) {
  switch (pipeline) {
    case TensorPipeline::kRing:
      return "ring";
    case TensorPipeline::kPingPong:
      return "ping-pong";
    case TensorPipeline::kBulk:
      return "bulk";
  }
  return "?";
}

// y (n_tokens x sum of rows) of one launch over `weights` (SwiGLU: {gate, up} into one output).
std::vector<float> run(const DeviceBuffer<float>& x, std::int64_t n_tokens,
                       const std::vector<const DeviceWeights*>& weights, bool swiglu,
                       bool vector_loads, TensorPipeline pipeline) {
  std::int64_t total_rows = 0;
  for (const DeviceWeights* w : weights) total_rows += w->view.rows;
  const std::int64_t out_rows = swiglu ? weights.front()->view.rows : total_rows;
  DeviceBuffer<float> y(static_cast<std::size_t>(n_tokens * out_rows));
  y.poison();
  std::vector<MatmulOutput> outputs;
  std::int64_t offset = 0;
  for (const DeviceWeights* w : weights) {
    outputs.push_back({w->view, y.get() + (swiglu ? 0 : offset * n_tokens)});
    offset += w->view.rows;
  }
  detail::matmul_tensor_cores(x.get(), n_tokens, outputs, swiglu, vector_loads, {}, nullptr,
                              pipeline);
  return y.download();
}

class CudaTensorPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SELFSPEC_REQUIRE_GPU();
    if (!tensor_core_gemv_supported()) GTEST_SKIP() << "no tensor-core GEMV on this device";
  }

  // Every pipeline against the ring for `weights` at every tile size, vector and scalar loads.
  static void expect_ring_bits(std::mt19937& rng, const std::vector<const DeviceWeights*>& weights,
                               bool swiglu) {
    const std::int64_t cols = weights.front()->view.cols;
    for (const std::int64_t n_tokens : {1, 3, 8, 9, 16, 17, 32, 33, 64}) {
      const DeviceBuffer<float> x(random_floats(rng, static_cast<std::size_t>(n_tokens * cols), 2));
      for (const bool vector_loads : {cols % 8 == 0, false}) {
        SCOPED_TRACE(::testing::Message() << "cols " << cols << " T " << n_tokens
                                          << (vector_loads ? " vector" : " scalar") << " loads");
        const std::vector<float> ring =
            run(x, n_tokens, weights, swiglu, vector_loads, TensorPipeline::kRing);
        for (const TensorPipeline pipeline : kOtherPipelines) {
          EXPECT_TRUE(same_bits(run(x, n_tokens, weights, swiglu, vector_loads, pipeline), ring))
              << pipeline_name(pipeline);
        }
      }
    }
  }
};

TEST_F(CudaTensorPipelineTest, EveryPipelineGivesTheRingsBitsForOneMatrix) {
  std::mt19937 rng(51);
  // Columns: whole chunks, a chunk and a half, a ragged end, several buffers' worth.
  for (const std::int64_t cols : {64, 1000, 4099, 4096}) {
    const DeviceWeights w = upload_weights(random_weights(rng, DType::kBF16, 40, cols));
    expect_ring_bits(rng, {&w}, false);
  }
}

TEST_F(CudaTensorPipelineTest, EveryPipelineGivesTheRingsBitsForSeveralMatricesAndSwiglu) {
  std::mt19937 rng(52);
  const DeviceWeights q = upload_weights(random_weights(rng, DType::kBF16, 48, 2048));
  const DeviceWeights k = upload_weights(random_weights(rng, DType::kBF16, 17, 2048));
  const DeviceWeights v = upload_weights(random_weights(rng, DType::kBF16, 17, 2048));
  expect_ring_bits(rng, {&q, &k, &v}, false);
  const DeviceWeights gate = upload_weights(random_weights(rng, DType::kBF16, 37, 1536));
  const DeviceWeights up = upload_weights(random_weights(rng, DType::kBF16, 37, 1536));
  expect_ring_bits(rng, {&gate, &up}, true);
}

TEST_F(CudaTensorPipelineTest, FusedFormsRefuseAnotherPipeline) {
  std::mt19937 rng(53);
  const DeviceWeights w = upload_weights(random_weights(rng, DType::kBF16, 16, 64));
  const DeviceBuffer<float> x(random_floats(rng, 64, 2));
  DeviceBuffer<float> y(16);
  const MatmulOutput outputs[] = {{w.view, y.get()}};
  detail::TensorGemvFusion accumulate;
  accumulate.accumulate = true;
  EXPECT_THROW(detail::matmul_tensor_cores(x.get(), 1, outputs, false, true, accumulate, nullptr,
                                           TensorPipeline::kPingPong),
               Error);
}

}  // namespace
}  // namespace selfspec::kernels::cuda::test
