// Device discovery for the CUDA backend: the number of visible devices, 0 on any error (no
// driver, no device, a driver too old for the runtime), never throwing.
#include "kernels/cuda/cuda_kernels.hpp"

#include <cuda_runtime.h>

namespace selfspec::kernels::cuda {

int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error so that later calls do not report it
    return 0;
  }
  return count < 0 ? 0 : count;
}

}  // namespace selfspec::kernels::cuda
