#include "tests/support/gpu.hpp"

#if SELFSPEC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace selfspec::testing {

std::string gpu_unavailable_reason() {
#if SELFSPEC_HAVE_CUDA
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    return std::string("no CUDA device: ") + cudaGetErrorString(status);
  }
  if (count == 0) return "no CUDA device: cudaGetDeviceCount() = 0";
  return {};
#else
  return "selfspec was built without CUDA (SELFSPEC_CUDA=OFF or no nvcc)";
#endif
}

}  // namespace selfspec::testing
