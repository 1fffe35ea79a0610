// Prefill GEMMs through cuBLASLt (see cublaslt_gemm.hpp).
//
// Row-major to column-major: cuBLASLt is column-major, and a row-major [R × C] matrix is the
// column-major [C × R] matrix with leading dimension C. With W [N × K], x [T × K] and y [T × N]
// row-major, y = x · Wᵀ becomes yᵀ = W · xᵀ, i.e. in column-major terms
//   D [N × T] (ld N) = op(A) · B,  A = W as column-major [K × N] (ld K) with op = transpose,
//                                   B = x as column-major [K × T] (ld K), no transpose.
// Types: A and B in the weight dtype (bf16, f16 or f32), C = D f32, CUBLAS_COMPUTE_32F with an
// f32 scale (for f32 weights this is plain f32 arithmetic, TF32 is never enabled). The algorithm
// is the heuristic's first choice for the shape under the 32 MiB workspace and the actual pointer
// alignments, cached per (dtype, N, K, T, alignments).
#include "kernels/cuda/cublaslt_gemm.hpp"

#include "core/cuda_check.hpp"
#include "core/error.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <type_traits>

namespace selfspec::kernels::cuda {
namespace {

struct MatmulDescDeleter {
  void operator()(std::remove_pointer_t<cublasLtMatmulDesc_t>* desc) const {
    (void)cublasLtMatmulDescDestroy(desc);
  }
};
struct LayoutDeleter {
  void operator()(std::remove_pointer_t<cublasLtMatrixLayout_t>* layout) const {
    (void)cublasLtMatrixLayoutDestroy(layout);
  }
};
struct PreferenceDeleter {
  void operator()(std::remove_pointer_t<cublasLtMatmulPreference_t>* preference) const {
    (void)cublasLtMatmulPreferenceDestroy(preference);
  }
};
using MatmulDesc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>, MatmulDescDeleter>;
using Layout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>, LayoutDeleter>;
using Preference =
    std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, PreferenceDeleter>;

Layout make_layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  SELFSPEC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                                   static_cast<std::uint64_t>(cols), ld));
  return Layout(layout);
}

// The largest power of two (<= 256) dividing the address.
std::uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
  }
  fail("cuBLASLt matmul: unsupported weight dtype {}", static_cast<int>(dtype));
}

}  // namespace

CublasLtGemm::CublasLtGemm() {
  SELFSPEC_CUBLAS_CHECK(cublasLtCreate(&handle_));
  const cudaError_t status = cudaMalloc(&workspace_, workspace_bytes_);
  if (status != cudaSuccess) {
    (void)cublasLtDestroy(handle_);
    handle_ = nullptr;
    workspace_ = nullptr;
    (void)cudaGetLastError();
    ::selfspec::detail::api_call_failed("CUDA", "cudaMalloc(cuBLASLt workspace)",
                                        cudaGetErrorString(status), __FILE__, __LINE__);
  }
}

CublasLtGemm::~CublasLtGemm() {
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
  if (handle_ != nullptr) (void)cublasLtDestroy(handle_);
}

void CublasLtGemm::matmul(const void* x_converted, std::int64_t n_tokens, const DeviceWeight& w,
                          float* y, cudaStream_t stream) {
  SELFSPEC_CHECK(n_tokens >= 0 && w.rows > 0 && w.cols > 0,
                 "cuBLASLt matmul: bad shape (tokens {}, weight {} x {})", n_tokens, w.rows,
                 w.cols);
  if (n_tokens == 0) return;
  SELFSPEC_CHECK(w.data != nullptr && x_converted != nullptr && y != nullptr,
                 "cuBLASLt matmul: null pointer");
  const cudaDataType_t type = cuda_type(w.dtype);
  const std::int64_t n = w.rows;
  const std::int64_t k = w.cols;

  cublasLtMatmulDesc_t raw_desc = nullptr;
  SELFSPEC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const MatmulDesc desc(raw_desc);
  const cublasOperation_t transpose = CUBLAS_OP_T;
  const cublasOperation_t no_transpose = CUBLAS_OP_N;
  SELFSPEC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA,
                                                       &transpose, sizeof(transpose)));
  SELFSPEC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB,
                                                       &no_transpose, sizeof(no_transpose)));
  const Layout a = make_layout(type, k, n, k);               // W: [K × N] column-major
  const Layout b = make_layout(type, k, n_tokens, k);        // x: [K × T] column-major
  const Layout c = make_layout(CUDA_R_32F, n, n_tokens, n);  // y: [N × T] column-major

  const AlgoKey key{static_cast<int>(w.dtype),
                    n,
                    k,
                    n_tokens,
                    alignment_of(w.data),
                    alignment_of(x_converted),
                    alignment_of(y)};
  auto found = algos_.find(key);
  if (found == algos_.end()) {
    cublasLtMatmulPreference_t raw_preference = nullptr;
    SELFSPEC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_preference));
    const Preference preference(raw_preference);
    const std::uint64_t workspace_limit = workspace_bytes_;
    SELFSPEC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_limit,
        sizeof(workspace_limit)));
    const std::uint32_t alignments[4] = {key.align_w, key.align_x, key.align_y, key.align_y};
    const cublasLtMatmulPreferenceAttributes_t alignment_attributes[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i) {
      SELFSPEC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
          preference.get(), alignment_attributes[i], &alignments[i], sizeof(alignments[i])));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    SELFSPEC_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, desc.get(), a.get(), b.get(),
                                                         c.get(), c.get(), preference.get(), 1,
                                                         &result, &returned));
    SELFSPEC_CHECK(returned > 0 && result.state == CUBLAS_STATUS_SUCCESS,
                   "cuBLASLt matmul: no algorithm for {} weights {} x {} with {} tokens",
                   dtype_name(w.dtype), n, k, n_tokens);
    found = algos_.emplace(key, result.algo).first;
  }

  const float alpha = 1.0f;
  const float beta = 0.0f;
  SELFSPEC_CUBLAS_CHECK(cublasLtMatmul(handle_, desc.get(), &alpha, w.data, a.get(), x_converted,
                                       b.get(), &beta, y, c.get(), y, c.get(), &found->second,
                                       workspace_, workspace_bytes_, stream));
}

}  // namespace selfspec::kernels::cuda
