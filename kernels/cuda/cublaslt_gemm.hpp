// Prefill GEMMs through cuBLASLt: y [T × N] = x [T × K] · Wᵀ with W [N × K] row-major bf16 (or
// f16; f32 weights use TF32-free f32), activations converted to the weight type, f32 accumulation
// and f32 output. RAII over the cuBLASLt handle and its workspace. The workspace is shared by
// all calls: use one CublasLtGemm per stream. Algorithms chosen by the heuristic are cached per
// shape and pointer alignment.
#pragma once

#include "kernels/cuda/cuda_kernels.hpp"

#include <cublasLt.h>

#include <cstdint>
#include <map>

namespace selfspec::kernels::cuda {

class CublasLtGemm {
 public:
  CublasLtGemm();
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // x_converted holds x in w.dtype ([T × K]); y is f32 [T × N].
  void matmul(const void* x_converted, std::int64_t n_tokens, const DeviceWeight& w, float* y,
              cudaStream_t stream);

 private:
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 32u << 20;

  struct AlgoKey {
    int dtype = 0;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t n_tokens = 0;
    std::uint32_t align_w = 0;
    std::uint32_t align_x = 0;
    std::uint32_t align_y = 0;
    auto operator<=>(const AlgoKey&) const = default;
  };
  std::map<AlgoKey, cublasLtMatmulAlgo_t> algos_;
};

}  // namespace selfspec::kernels::cuda
