// Prefill GEMMs through cuBLASLt: y [T × N] = x [T × K] · Wᵀ with W [N × K] row-major bf16 (or
// f16; f32 weights use TF32-free f32), activations converted to the weight type, f32 accumulation
// and f32 output. RAII over the cuBLASLt handle and its workspace.
#pragma once

#include "kernels/cuda/cuda_kernels.hpp"

#include <cublasLt.h>

#include <cstdint>

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
};

}  // namespace selfspec::kernels::cuda
