// RAII over a cudaEvent_t (timing with events: record, synchronize, elapsed time).
#pragma once

#include "core/cuda_check.hpp"

#include <cuda_runtime.h>

namespace selfspec::kernels::cuda {

class CudaEvent {
 public:
  CudaEvent() { SELFSPEC_CUDA_CHECK(cudaEventCreate(&event_)); }
  ~CudaEvent() { (void)cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

  // Milliseconds between two recorded events (both must have completed).
  static float elapsed_ms(const CudaEvent& start, const CudaEvent& stop) {
    float ms = 0.0f;
    SELFSPEC_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace selfspec::kernels::cuda
