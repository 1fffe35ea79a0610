// The CUDA and cuBLAS members of the check-macro family (core/check.hpp, fmt-free for nvcc): a
// failed call becomes a selfspec::Error naming the statement, the library's own error string,
// file:line, rank and host. SELFSPEC_CUDA_CHECK_LAUNCH() checks the last kernel launch.
#pragma once

#include "core/check.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#define SELFSPEC_CUDA_CHECK(statement)                                                    \
  do {                                                                                    \
    const cudaError_t selfspec_cuda_rc_ = (statement);                                    \
    if (selfspec_cuda_rc_ != cudaSuccess)                                                 \
      ::selfspec::detail::api_call_failed(                                                \
          "CUDA", #statement, cudaGetErrorString(selfspec_cuda_rc_), __FILE__, __LINE__); \
  } while (0)

#define SELFSPEC_CUDA_CHECK_LAUNCH() SELFSPEC_CUDA_CHECK(cudaGetLastError())

#define SELFSPEC_CUBLAS_CHECK(statement)                                                         \
  do {                                                                                           \
    const cublasStatus_t selfspec_cublas_rc_ = (statement);                                      \
    if (selfspec_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                            \
      ::selfspec::detail::api_call_failed(                                                       \
          "cuBLAS", #statement, cublasGetStatusString(selfspec_cublas_rc_), __FILE__, __LINE__); \
  } while (0)
