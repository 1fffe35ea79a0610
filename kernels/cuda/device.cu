// Device discovery for the CUDA backend: the number of visible devices, 0 on any error (no
// driver, no device, a driver too old for the runtime), never throwing; whether launches use
// programmatic dependent launch (cuda_common.cuh); and whether bf16 GEMVs run on tensor cores
// (matmul_tensor_core.hpp).
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/matmul_tensor_core.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

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

namespace {

// The current device's compute capability major (0 when unknown), cached per device (a
// device's compute capability never changes).
int compute_capability_major() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // static storage: zero-initialised; major + 1
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) {
    (void)cudaGetLastError();
    return 0;
  }
  int cached = known[device].load(std::memory_order_relaxed);
  if (cached == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      (void)cudaGetLastError();
      major = 0;
    }
    cached = major + 1;
    known[device].store(cached, std::memory_order_relaxed);
  }
  return cached - 1;
}

}  // namespace

bool pdl_enabled() {
  static const bool allowed = [] {
    const char* env = std::getenv("SELFSPEC_CUDA_PDL");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return allowed && compute_capability_major() >= 9;
}

bool tensor_core_gemv_supported() {
  return compute_capability_major() >= 8;
}

bool gemv_fusion_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("SELFSPEC_CUDA_FUSE");
    const std::string value = env == nullptr ? "" : env;
    require(value.empty() || value == "0" || value == "1",
            "SELFSPEC_CUDA_FUSE=" + value + ": expected 0 or 1");
    return value != "0";
  }();
  return enabled;
}

bool bulk_copy_supported() {
  return compute_capability_major() >= 9;
}

bool tensor_core_gemv_enabled() {
  static const bool requested = [] {
    const char* env = std::getenv("SELFSPEC_CUDA_GEMV");
    const std::string value = env == nullptr ? "" : env;
    require(value.empty() || value == "auto" || value == "tensor-cores" || value == "cuda-cores",
            "SELFSPEC_CUDA_GEMV=" + value + ": expected auto, tensor-cores or cuda-cores");
    return value == "tensor-cores";
  }();
  return requested && tensor_core_gemv_supported();
}

}  // namespace detail

}  // namespace selfspec::kernels::cuda
