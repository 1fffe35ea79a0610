// RAII over a non-blocking cudaStream_t (benches and tests that need a stream of their own; the
// CUDA backend makes its stream after choosing its device).
#pragma once

#include "core/cuda_check.hpp"

#include <cuda_runtime.h>

namespace selfspec::kernels::cuda {

class CudaStream {
 public:
  CudaStream() { SELFSPEC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() { (void)cudaStreamDestroy(stream_); }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace selfspec::kernels::cuda
