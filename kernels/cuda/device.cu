// Device discovery for the CUDA backend: the number of visible devices, 0 on any error (no
// driver, no device, a driver too old for the runtime), never throwing; and whether launches use
// programmatic dependent launch (cuda_common.cuh).
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

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

namespace detail {

bool pdl_enabled() {
  static const bool allowed = [] {
    const char* env = std::getenv("SELFSPEC_CUDA_PDL");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  if (!allowed) return false;
  // Per device: 0 unknown, 1 no, 2 yes (a device's compute capability never changes).
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // static storage: zero-initialised
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) {
    (void)cudaGetLastError();
    return false;
  }
  int cached = known[device].load(std::memory_order_relaxed);
  if (cached == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      (void)cudaGetLastError();
      major = 0;
    }
    cached = major >= 9 ? 2 : 1;
    known[device].store(cached, std::memory_order_relaxed);
  }
  return cached == 2;
}

}  // namespace detail

}  // namespace selfspec::kernels::cuda
