// matmul_small_batch and the cuBLASLt prefill GEMM against the CPU matmul, for every weight dtype
// on the CUDA-core GEMV and bf16 on the tensor-core GEMV, at awkward shapes (cols not a multiple
// of the 16-byte chunk or of the tensor cores' 32-element chunk, one row, more rows than a block),
// and the GPU token-count invariance contract for both kernels: row t of a T-token product (T up
// to 64, several token tiles) equals the 1-token product of x row t bit for bit, the vector-load
// and scalar-load paths (aligned vs misaligned pointers) give identical bits, several matrices in
// one launch (Wq|Wk|Wv) give each matrix's own bits, and the SwiGLU epilogue the two products';
// then the tensor-core GEMV's fused forms (folded RMSNorm, residual add).
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cuda/cublaslt_gemm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

struct Shape {
  std::int64_t rows;
  std::int64_t cols;
};
constexpr Shape kShapes[] = {{1, 8}, {37, 64}, {130, 1001}, {67, 4099}, {300, 4096}, {5, 3}};
constexpr std::int64_t kTokenCounts[] = {1, 2, 5, 13, 16, 17, 40, 64};

// |actual − expected| <= rel · Σ_k |x_k w_k| per output (a bound on any summation order's error).
void expect_matmul_close(const std::vector<float>& actual, const std::vector<float>& expected,
                         const std::vector<float>& x, const StoredWeights& w, std::int64_t n_tokens,
                         double rel, const char* what) {
  ASSERT_EQ(actual.size(), expected.size());
  int failures = 0;
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t n = 0; n < w.rows; ++n) {
      double magnitude = 0.0;
      for (std::int64_t k = 0; k < w.cols; ++k) {
        magnitude += std::fabs(static_cast<double>(x[static_cast<std::size_t>(t * w.cols + k)]) *
                               w.exact[static_cast<std::size_t>(n * w.cols + k)]);
      }
      const auto i = static_cast<std::size_t>(t * w.rows + n);
      const double diff = std::fabs(static_cast<double>(actual[i]) - expected[i]);
      if (!(diff <= rel * magnitude + 1e-30)) {
        if (++failures <= 5) {
          ADD_FAILURE() << what << ": token " << t << " row " << n << " is " << actual[i]
                        << ", expected " << expected[i] << " (scale " << magnitude << ")";
        }
      }
    }
  }
  EXPECT_EQ(failures, 0) << what;
}

// A weight dtype and the GEMV kernel that multiplies it.
struct GemvCase {
  DType dtype;
  GemvKernel kernel;
};
constexpr GemvCase kGemvCases[] = {{DType::kF32, GemvKernel::kCudaCores},
                                   {DType::kBF16, GemvKernel::kCudaCores},
                                   {DType::kF16, GemvKernel::kCudaCores},
                                   {DType::kBF16, GemvKernel::kTensorCores}};

class CudaMatmulTest : public ::testing::TestWithParam<GemvCase> {};

TEST_P(CudaMatmulTest, SmallBatchMatchesCpu) {
  SELFSPEC_REQUIRE_GPU();
  const DType dtype = GetParam().dtype;
  const GemvKernel kernel = GetParam().kernel;
  std::mt19937 rng(21);
  for (const Shape shape : kShapes) {
    const StoredWeights w = random_weights(rng, dtype, shape.rows, shape.cols);
    const DeviceWeights d_w = upload_weights(w);
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.cols << " T " << n_tokens);
      const std::vector<float> x =
          random_floats(rng, static_cast<std::size_t>(n_tokens * shape.cols), 2);
      std::vector<float> expected(static_cast<std::size_t>(n_tokens * shape.rows));
      cpu::matmul(x.data(), n_tokens, cpu_view(w), expected.data());
      DeviceBuffer<float> d_x(x);
      DeviceBuffer<float> d_y(expected.size());
      d_y.poison();
      matmul_small_batch(d_x.get(), n_tokens, d_w.view, d_y.get(), nullptr, kernel);
      expect_matmul_close(d_y.download(), expected, x, w, n_tokens, 1e-5, "matmul_small_batch");
    }
  }
}

TEST_P(CudaMatmulTest, SmallBatchIsTokenCountInvariantBitForBit) {
  SELFSPEC_REQUIRE_GPU();
  const DType dtype = GetParam().dtype;
  const GemvKernel kernel = GetParam().kernel;
  std::mt19937 rng(22);
  for (const Shape shape : kShapes) {
    const StoredWeights w = random_weights(rng, dtype, shape.rows, shape.cols);
    const DeviceWeights d_w = upload_weights(w);
    const std::int64_t max_tokens = kSmallBatch;
    const std::vector<float> x =
        random_floats(rng, static_cast<std::size_t>(max_tokens * shape.cols), 2);
    DeviceBuffer<float> d_x(x);
    // The 1-token reference of every row of x.
    std::vector<std::vector<float>> single(static_cast<std::size_t>(max_tokens));
    DeviceBuffer<float> d_one(static_cast<std::size_t>(shape.rows));
    for (std::int64_t t = 0; t < max_tokens; ++t) {
      d_one.poison();
      matmul_small_batch(d_x.get() + t * shape.cols, 1, d_w.view, d_one.get(), nullptr, kernel);
      single[static_cast<std::size_t>(t)] = d_one.download();
    }
    for (std::int64_t n_tokens = 1; n_tokens <= max_tokens; n_tokens += n_tokens < 20 ? 1 : 7) {
      SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.cols << " T " << n_tokens);
      DeviceBuffer<float> d_y(static_cast<std::size_t>(n_tokens * shape.rows));
      d_y.poison();
      matmul_small_batch(d_x.get(), n_tokens, d_w.view, d_y.get(), nullptr, kernel);
      const std::vector<float> y = d_y.download();
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        const std::vector<float> row(y.begin() + t * shape.rows, y.begin() + (t + 1) * shape.rows);
        EXPECT_TRUE(same_bits(row, single[static_cast<std::size_t>(t)])) << "token " << t;
      }
    }
  }
}

TEST_P(CudaMatmulTest, VectorAndScalarLoadPathsAreBitIdentical) {
  SELFSPEC_REQUIRE_GPU();
  const DType dtype = GetParam().dtype;
  const GemvKernel kernel = GetParam().kernel;
  std::mt19937 rng(23);
  for (const Shape shape : {Shape{37, 64}, Shape{67, 4096}}) {
    const StoredWeights w = random_weights(rng, dtype, shape.rows, shape.cols);
    const DeviceWeights aligned = upload_weights(w);
    const DeviceWeights misaligned = upload_weights(w, 1);  // one element off 16 bytes
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.cols << " T " << n_tokens);
      const std::vector<float> x =
          random_floats(rng, static_cast<std::size_t>(n_tokens * shape.cols), 2);
      DeviceBuffer<float> d_x(x);
      std::vector<float> x_shifted(x.size() + 1, 0.0f);
      std::copy(x.begin(), x.end(), x_shifted.begin() + 1);
      DeviceBuffer<float> d_x_shifted(x_shifted);  // x at a 4-byte (not 16-byte) boundary
      const auto n_out = static_cast<std::size_t>(n_tokens * shape.rows);
      DeviceBuffer<float> d_a(n_out);
      DeviceBuffer<float> d_b(n_out);
      DeviceBuffer<float> d_c(n_out);
      d_a.poison();
      d_b.poison();
      d_c.poison();
      matmul_small_batch(d_x.get(), n_tokens, aligned.view, d_a.get(), nullptr, kernel);
      matmul_small_batch(d_x.get(), n_tokens, misaligned.view, d_b.get(), nullptr, kernel);
      matmul_small_batch(d_x_shifted.get() + 1, n_tokens, aligned.view, d_c.get(), nullptr, kernel);
      const std::vector<float> a = d_a.download();
      EXPECT_TRUE(same_bits(a, d_b.download())) << "misaligned weights";
      EXPECT_TRUE(same_bits(a, d_c.download())) << "misaligned activations";
    }
  }
}

TEST_P(CudaMatmulTest, SeveralMatricesInOneLaunchEqualTheirOwnLaunches) {
  SELFSPEC_REQUIRE_GPU();
  const DType dtype = GetParam().dtype;
  const GemvKernel kernel = GetParam().kernel;
  std::mt19937 rng(26);
  for (const std::int64_t cols : {std::int64_t{64}, std::int64_t{1001}, std::int64_t{4096}}) {
    // Row counts that do not fill a warp's rows, and an empty matrix in the middle.
    const std::vector<std::int64_t> rows = {37, 5, 0, 130};
    std::vector<StoredWeights> host;
    std::vector<DeviceWeights> device;
    for (const std::int64_t r : rows) {
      host.push_back(random_weights(rng, dtype, r, cols));
      device.push_back(upload_weights(host.back()));
    }
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << "cols " << cols << " T " << n_tokens);
      const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(n_tokens * cols), 2);
      DeviceBuffer<float> d_x(x);
      std::vector<DeviceBuffer<float>> fused;
      std::vector<MatmulOutput> outputs;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        fused.emplace_back(static_cast<std::size_t>(n_tokens * rows[i]));
        fused.back().poison();
      }
      for (std::size_t i = 0; i < rows.size(); ++i)
        outputs.push_back({device[i].view, fused[i].get()});
      matmul_small_batch(d_x.get(), n_tokens, outputs, nullptr, kernel);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        DeviceBuffer<float> alone(static_cast<std::size_t>(n_tokens * rows[i]));
        alone.poison();
        matmul_small_batch(d_x.get(), n_tokens, device[i].view, alone.get(), nullptr, kernel);
        EXPECT_TRUE(same_bits(fused[i].download(), alone.download())) << "matrix " << i;
      }
    }
  }
  // Matrices of different column counts or dtypes cannot share a launch.
  const StoredWeights a = random_weights(rng, dtype, 8, 64);
  const StoredWeights b = random_weights(rng, dtype, 8, 72);
  const DeviceWeights d_a = upload_weights(a);
  const DeviceWeights d_b = upload_weights(b);
  DeviceBuffer<float> d_x(static_cast<std::size_t>(72));
  DeviceBuffer<float> d_y(static_cast<std::size_t>(16));
  const std::vector<MatmulOutput> mixed = {{d_a.view, d_y.get()}, {d_b.view, d_y.get() + 8}};
  EXPECT_THROW(matmul_small_batch(d_x.get(), 1, mixed, nullptr, kernel), Error);
  const std::vector<MatmulOutput> too_many(kMaxMatmulOutputs + 1,
                                           MatmulOutput{d_a.view, d_y.get()});
  EXPECT_THROW(matmul_small_batch(d_x.get(), 1, too_many, nullptr, kernel), Error);
}

TEST_P(CudaMatmulTest, SwigluEpilogueEqualsTheTwoProductsAndSwiglu) {
  SELFSPEC_REQUIRE_GPU();
  const DType dtype = GetParam().dtype;
  const GemvKernel kernel = GetParam().kernel;
  std::mt19937 rng(27);
  for (const Shape shape : {Shape{37, 64}, Shape{130, 1001}, Shape{300, 4096}, Shape{5, 3}}) {
    const StoredWeights gate = random_weights(rng, dtype, shape.rows, shape.cols);
    const StoredWeights up = random_weights(rng, dtype, shape.rows, shape.cols);
    const DeviceWeights d_gate = upload_weights(gate);
    const DeviceWeights d_up = upload_weights(up);
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.cols << " T " << n_tokens);
      const std::vector<float> x =
          random_floats(rng, static_cast<std::size_t>(n_tokens * shape.cols), 2);
      DeviceBuffer<float> d_x(x);
      const auto n = static_cast<std::size_t>(n_tokens * shape.rows);
      DeviceBuffer<float> g(n), u(n), reference(n), fused(n);
      g.poison();
      u.poison();
      reference.poison();
      fused.poison();
      matmul_small_batch(d_x.get(), n_tokens, d_gate.view, g.get(), nullptr, kernel);
      matmul_small_batch(d_x.get(), n_tokens, d_up.view, u.get(), nullptr, kernel);
      swiglu(g.get(), u.get(), reference.get(), static_cast<std::int64_t>(n), nullptr);
      matmul_swiglu(d_x.get(), n_tokens, d_gate.view, d_up.view, fused.get(), nullptr, kernel);
      EXPECT_TRUE(same_bits(fused.download(), reference.download()));
    }
  }
  const StoredWeights small = random_weights(rng, dtype, 4, 64);
  const StoredWeights other = random_weights(rng, dtype, 5, 64);
  const DeviceWeights d_small = upload_weights(small);
  const DeviceWeights d_other = upload_weights(other);
  DeviceBuffer<float> d_x(static_cast<std::size_t>(64));
  DeviceBuffer<float> d_y(static_cast<std::size_t>(5));
  EXPECT_THROW(matmul_swiglu(d_x.get(), 1, d_small.view, d_other.view, d_y.get(), nullptr, kernel),
               Error);
}

// cuBLASLt (the prefill GEMMs past kSmallBatch tokens), once per weight dtype.
class CudaCublasLtTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaCublasLtTest, CublasLtMatchesCpu) {
  SELFSPEC_REQUIRE_GPU();
  const DType dtype = GetParam();
  // x is rounded to the weight dtype first: bf16 keeps 8 mantissa bits, f16 11.
  const double rel = dtype == DType::kF32 ? 1e-5 : 1e-2;
  std::mt19937 rng(24);
  CublasLtGemm gemm;
  for (const Shape shape : {Shape{64, 128}, Shape{129, 520}, Shape{300, 1000}}) {
    const StoredWeights w = random_weights(rng, dtype, shape.rows, shape.cols);
    const DeviceWeights d_w = upload_weights(w);
    for (const std::int64_t n_tokens : {std::int64_t{17}, std::int64_t{64}, std::int64_t{100}}) {
      SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.cols << " T " << n_tokens);
      const std::vector<float> x =
          random_floats(rng, static_cast<std::size_t>(n_tokens * shape.cols), 2);
      std::vector<float> expected(static_cast<std::size_t>(n_tokens * shape.rows));
      cpu::matmul(x.data(), n_tokens, cpu_view(w), expected.data());
      DeviceBuffer<float> d_x(x);
      DeviceBuffer<std::uint8_t> d_x_converted(x.size() * dtype_size(dtype));
      convert_activations(d_x.get(), dtype, d_x_converted.get(),
                          static_cast<std::int64_t>(x.size()), nullptr);
      DeviceBuffer<float> d_y(expected.size());
      d_y.poison();
      gemm.matmul(d_x_converted.get(), n_tokens, d_w.view, d_y.get(), nullptr);
      expect_matmul_close(d_y.download(), expected, x, w, n_tokens, rel, "cuBLASLt");
      // A second call reuses the cached algorithm.
      d_y.poison();
      gemm.matmul(d_x_converted.get(), n_tokens, d_w.view, d_y.get(), nullptr);
      expect_matmul_close(d_y.download(), expected, x, w, n_tokens, rel, "cuBLASLt (cached)");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaCublasLtTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& param_info) {
                           return std::string(dtype_name(param_info.param));
                         });

INSTANTIATE_TEST_SUITE_P(AllKernels, CudaMatmulTest, ::testing::ValuesIn(kGemvCases),
                         [](const auto& param_info) {
                           return std::string(dtype_name(param_info.param.dtype)) +
                                  (param_info.param.kernel == GemvKernel::kTensorCores
                                       ? "_tensor_cores"
                                       : "_cuda_cores");
                         });

// kAuto: every dtype on the CUDA cores unless SELFSPEC_CUDA_GEMV=tensor-cores puts bf16 on the
// tensor cores (compute capability >= 8.0); auto's bits are the kernel's it names; the fused forms
// are offered to models where auto is the tensor cores. The tensor cores take bf16 only.
TEST(CudaMatmulKernels, AutoPicksTheRequestedKernelAndEqualsTheKernelItNames) {
  SELFSPEC_REQUIRE_GPU();
  EXPECT_EQ(auto_gemv_kernel(DType::kF32), GemvKernel::kCudaCores);
  EXPECT_EQ(auto_gemv_kernel(DType::kF16), GemvKernel::kCudaCores);
  int device = 0;
  int major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  EXPECT_EQ(tensor_core_gemv_supported(), major >= 8);
  const char* env = std::getenv("SELFSPEC_CUDA_GEMV");
  const bool asked_tensor_cores = env != nullptr && std::string(env) == "tensor-cores";
  const GemvKernel expected =
      major >= 8 && asked_tensor_cores ? GemvKernel::kTensorCores : GemvKernel::kCudaCores;
  EXPECT_EQ(auto_gemv_kernel(DType::kBF16), expected);
  EXPECT_EQ(fused_gemv_available(DType::kBF16), expected == GemvKernel::kTensorCores);
  std::mt19937 rng(28);
  const StoredWeights w = random_weights(rng, DType::kBF16, 300, 4096);
  const DeviceWeights d_w = upload_weights(w);
  const std::int64_t n_tokens = 7;
  DeviceBuffer<float> d_x(random_floats(rng, static_cast<std::size_t>(n_tokens * 4096), 2));
  DeviceBuffer<float> automatic(static_cast<std::size_t>(n_tokens * 300));
  DeviceBuffer<float> named(static_cast<std::size_t>(n_tokens * 300));
  automatic.poison();
  named.poison();
  matmul_small_batch(d_x.get(), n_tokens, d_w.view, automatic.get(), nullptr);
  matmul_small_batch(d_x.get(), n_tokens, d_w.view, named.get(), nullptr,
                     auto_gemv_kernel(DType::kBF16));
  EXPECT_TRUE(same_bits(automatic.download(), named.download()));

  const StoredWeights f32 = random_weights(rng, DType::kF32, 8, 64);
  const DeviceWeights d_f32 = upload_weights(f32);
  EXPECT_THROW(
      matmul_small_batch(d_x.get(), 1, d_f32.view, named.get(), nullptr, GemvKernel::kTensorCores),
      Error);
}

// The fused forms (bf16) of each GEMV: the folded RMSNorm against the CPU's rmsnorm then matmul
// (within rounding), token-count invariant and fusable; the normed SwiGLU equal to the two normed
// products and swiglu(); the residual add equal to the kernel's product then an f32 add.
class CudaFusedGemvTest : public ::testing::TestWithParam<GemvKernel> {
 protected:
  void SetUp() override {
    SELFSPEC_REQUIRE_GPU();
    if (kernel() == GemvKernel::kTensorCores && !tensor_core_gemv_supported()) {
      GTEST_SKIP() << "no tensor-core GEMV on this device";
    }
  }
  static GemvKernel kernel() { return GetParam(); }
  // rmsnorm(x) rows in double, rounded to f32 (the reference's input to the CPU matmul).
  static std::vector<float> normed(const std::vector<float>& x, const std::vector<float>& g,
                                   float eps, std::int64_t n_tokens, std::int64_t cols) {
    std::vector<float> h(x.size());
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      double squares = 0.0;
      for (std::int64_t k = 0; k < cols; ++k) {
        const double v = x[static_cast<std::size_t>(t * cols + k)];
        squares += v * v;
      }
      const double r = 1.0 / std::sqrt(squares / static_cast<double>(cols) + eps);
      for (std::int64_t k = 0; k < cols; ++k) {
        const auto i = static_cast<std::size_t>(t * cols + k);
        h[i] = static_cast<float>(static_cast<double>(g[static_cast<std::size_t>(k)]) * x[i] * r);
      }
    }
    return h;
  }
  static constexpr float kEps = 1e-5F;
};

TEST_P(CudaFusedGemvTest, NormedMatmulMatchesTheCpuAndIsTokenCountInvariant) {
  std::mt19937 rng(29);
  for (const Shape shape : kShapes) {
    const StoredWeights w = random_weights(rng, DType::kBF16, shape.rows, shape.cols);
    const DeviceWeights d_w = upload_weights(w);
    const std::vector<float> g = random_floats(rng, static_cast<std::size_t>(shape.cols), 1);
    const DeviceBuffer<float> d_g(g);
    const std::vector<float> x =
        random_floats(rng, static_cast<std::size_t>(kSmallBatch * shape.cols), 3);
    const DeviceBuffer<float> d_x(x);
    std::vector<std::vector<float>> single(static_cast<std::size_t>(kSmallBatch));
    DeviceBuffer<float> d_one(static_cast<std::size_t>(shape.rows));
    for (std::int64_t t = 0; t < kSmallBatch; ++t) {
      d_one.poison();
      const MatmulOutput out{d_w.view, d_one.get()};
      matmul_normed(d_x.get() + t * shape.cols, d_g.get(), kEps, 1, std::span(&out, 1), nullptr,
                    kernel());
      single[static_cast<std::size_t>(t)] = d_one.download();
    }
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.cols << " T " << n_tokens);
      DeviceBuffer<float> d_y(static_cast<std::size_t>(n_tokens * shape.rows));
      d_y.poison();
      const MatmulOutput out{d_w.view, d_y.get()};
      matmul_normed(d_x.get(), d_g.get(), kEps, n_tokens, std::span(&out, 1), nullptr, kernel());
      const std::vector<float> y = d_y.download();
      const std::vector<float> x_t(x.begin(), x.begin() + n_tokens * shape.cols);
      const std::vector<float> h = normed(x_t, g, kEps, n_tokens, shape.cols);
      std::vector<float> expected(y.size());
      cpu::matmul(h.data(), n_tokens, cpu_view(w), expected.data());
      expect_matmul_close(y, expected, h, w, n_tokens, 3e-5, "matmul_normed");
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        const std::vector<float> row(y.begin() + t * shape.rows, y.begin() + (t + 1) * shape.rows);
        EXPECT_TRUE(same_bits(row, single[static_cast<std::size_t>(t)])) << "token " << t;
      }
    }
  }
}

TEST_P(CudaFusedGemvTest, NormedMatricesInOneLaunchEqualTheirOwnLaunches) {
  std::mt19937 rng(30);
  const std::int64_t cols = 1001;
  const std::vector<std::int64_t> rows = {37, 5, 0, 130};
  std::vector<DeviceWeights> device;
  for (const std::int64_t r : rows)
    device.push_back(upload_weights(random_weights(rng, DType::kBF16, r, cols)));
  const DeviceBuffer<float> d_g(random_floats(rng, static_cast<std::size_t>(cols), 1));
  for (const std::int64_t n_tokens : kTokenCounts) {
    SCOPED_TRACE(::testing::Message() << "T " << n_tokens);
    const DeviceBuffer<float> d_x(random_floats(rng, static_cast<std::size_t>(n_tokens * cols), 2));
    std::vector<DeviceBuffer<float>> fused;
    std::vector<MatmulOutput> outputs;
    for (const std::int64_t r : rows) {
      fused.emplace_back(static_cast<std::size_t>(n_tokens * r));
      fused.back().poison();
    }
    for (std::size_t i = 0; i < rows.size(); ++i)
      outputs.push_back({device[i].view, fused[i].get()});
    matmul_normed(d_x.get(), d_g.get(), kEps, n_tokens, outputs, nullptr, kernel());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      DeviceBuffer<float> alone(static_cast<std::size_t>(n_tokens * rows[i]));
      alone.poison();
      const MatmulOutput out{device[i].view, alone.get()};
      matmul_normed(d_x.get(), d_g.get(), kEps, n_tokens, std::span(&out, 1), nullptr, kernel());
      EXPECT_TRUE(same_bits(fused[i].download(), alone.download())) << "matrix " << i;
    }
  }
}

TEST_P(CudaFusedGemvTest, NormedSwigluEqualsTheNormedProductsAndSwiglu) {
  std::mt19937 rng(31);
  for (const Shape shape : {Shape{37, 64}, Shape{130, 1001}, Shape{300, 4096}, Shape{5, 3}}) {
    const DeviceWeights gate =
        upload_weights(random_weights(rng, DType::kBF16, shape.rows, shape.cols));
    const DeviceWeights up =
        upload_weights(random_weights(rng, DType::kBF16, shape.rows, shape.cols));
    const DeviceBuffer<float> d_g(random_floats(rng, static_cast<std::size_t>(shape.cols), 1));
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.cols << " T " << n_tokens);
      const DeviceBuffer<float> d_x(
          random_floats(rng, static_cast<std::size_t>(n_tokens * shape.cols), 2));
      const auto n = static_cast<std::size_t>(n_tokens * shape.rows);
      DeviceBuffer<float> g(n), u(n), reference(n), fused(n);
      g.poison();
      u.poison();
      reference.poison();
      fused.poison();
      const MatmulOutput gate_out{gate.view, g.get()};
      const MatmulOutput up_out{up.view, u.get()};
      matmul_normed(d_x.get(), d_g.get(), kEps, n_tokens, std::span(&gate_out, 1), nullptr,
                    kernel());
      matmul_normed(d_x.get(), d_g.get(), kEps, n_tokens, std::span(&up_out, 1), nullptr, kernel());
      swiglu(g.get(), u.get(), reference.get(), static_cast<std::int64_t>(n), nullptr);
      matmul_normed_swiglu(d_x.get(), d_g.get(), kEps, n_tokens, gate.view, up.view, fused.get(),
                           nullptr, kernel());
      EXPECT_TRUE(same_bits(fused.download(), reference.download()));
    }
  }
}

TEST_P(CudaFusedGemvTest, AccumulateEqualsTheProductThenAnF32Add) {
  std::mt19937 rng(32);
  for (const Shape shape : kShapes) {
    const DeviceWeights d_w =
        upload_weights(random_weights(rng, DType::kBF16, shape.rows, shape.cols));
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.cols << " T " << n_tokens);
      const DeviceBuffer<float> d_x(
          random_floats(rng, static_cast<std::size_t>(n_tokens * shape.cols), 2));
      const std::vector<float> y0 =
          random_floats(rng, static_cast<std::size_t>(n_tokens * shape.rows), 3);
      DeviceBuffer<float> d_y(y0);
      DeviceBuffer<float> product(y0.size());
      product.poison();
      matmul_small_batch(d_x.get(), n_tokens, d_w.view, product.get(), nullptr, kernel());
      matmul_accumulate(d_x.get(), n_tokens, d_w.view, d_y.get(), nullptr, kernel());
      const std::vector<float> p = product.download();
      std::vector<float> expected(y0.size());
      for (std::size_t i = 0; i < y0.size(); ++i) expected[i] = y0[i] + p[i];
      EXPECT_TRUE(same_bits(d_y.download(), expected));
    }
  }
}

TEST_P(CudaFusedGemvTest, FusedFormsTakeBf16Only) {
  std::mt19937 rng(33);
  const DeviceWeights f32 = upload_weights(random_weights(rng, DType::kF32, 8, 64));
  DeviceBuffer<float> d_x(static_cast<std::size_t>(64));
  DeviceBuffer<float> d_g(static_cast<std::size_t>(64));
  DeviceBuffer<float> d_y(static_cast<std::size_t>(8));
  const MatmulOutput out{f32.view, d_y.get()};
  EXPECT_THROW(matmul_normed(d_x.get(), d_g.get(), kEps, 1, std::span(&out, 1), nullptr, kernel()),
               Error);
  EXPECT_THROW(matmul_accumulate(d_x.get(), 1, f32.view, d_y.get(), nullptr, kernel()), Error);
  EXPECT_THROW(matmul_normed_swiglu(d_x.get(), d_g.get(), kEps, 1, f32.view, f32.view, d_y.get(),
                                    nullptr, kernel()),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaFusedGemvTest,
                         ::testing::Values(GemvKernel::kCudaCores, GemvKernel::kTensorCores),
                         [](const auto& param_info) {
                           return param_info.param == GemvKernel::kTensorCores
                                      ? std::string("tensor_cores")
                                      : std::string("cuda_cores");
                         });

TEST(CudaMatmulEdgeCases, BadArgumentsThrowAndEmptyCallsDoNothing) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(25);
  const StoredWeights w = random_weights(rng, DType::kBF16, 4, 16);
  const DeviceWeights d_w = upload_weights(w);
  DeviceBuffer<float> d_x(static_cast<std::size_t>(65 * 16));
  DeviceBuffer<float> d_y(static_cast<std::size_t>(65 * 4));
  EXPECT_THROW(matmul_small_batch(d_x.get(), kSmallBatch + 1, d_w.view, d_y.get(), nullptr), Error);
  EXPECT_THROW(matmul_small_batch(d_x.get(), -1, d_w.view, d_y.get(), nullptr), Error);
  d_y.poison();
  matmul_small_batch(d_x.get(), 0, d_w.view, d_y.get(), nullptr);
  for (const float v : d_y.download()) EXPECT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace selfspec::kernels::cuda::test
