// Helpers of the CUDA kernel tests: an owning device buffer (RAII over cudaMalloc/cudaFree), host
// <-> device copies that synchronise first (so a faulting kernel fails the test that launched
// it), NaN poisoning of outputs and tolerance helpers. Random host data comes from the CPU kernel
// tests' helpers (kernel_test_util.hpp), which never produce all-zero data.
#pragma once

#include "core/cuda_check.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "tests/support/gpu.hpp"
#include "tests/unit/kernels/kernel_test_util.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace selfspec::kernels::cuda::test {

using cpu::test::kAllDtypes;
using cpu::test::nan_filled;
using cpu::test::random_floats;
using cpu::test::random_weights;
using cpu::test::StoredWeights;

// Waits for the device and surfaces any asynchronous kernel error.
inline void sync_device() {
  SELFSPEC_CUDA_CHECK(cudaDeviceSynchronize());
}

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : size_(n) {
    void* pointer = nullptr;
    SELFSPEC_CUDA_CHECK(cudaMalloc(&pointer, (n == 0 ? 1 : n) * sizeof(T)));
    data_.reset(static_cast<T*>(pointer));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }

  T* get() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

  void upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size(), size_);
    sync_device();
    SELFSPEC_CUDA_CHECK(cudaMemcpy(get(), host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    sync_device();
    SELFSPEC_CUDA_CHECK(cudaMemcpy(host.data(), get(), bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  // Every byte 0.
  void zero() {
    sync_device();
    SELFSPEC_CUDA_CHECK(cudaMemset(get(), 0, bytes()));
  }
  // Every byte 0xff: NaN for floats and doubles, -1 for integers.
  void poison() {
    sync_device();
    SELFSPEC_CUDA_CHECK(cudaMemset(get(), 0xff, bytes()));
  }

 private:
  struct Free {
    void operator()(T* pointer) const { (void)cudaFree(pointer); }
  };
  std::unique_ptr<T, Free> data_;
  std::size_t size_ = 0;
};

// Device copy of a test weight matrix, optionally `offset_elements` into its buffer (to test
// misaligned data pointers).
struct DeviceWeights {
  DeviceBuffer<std::uint8_t> buffer;
  DeviceWeight view;
};

inline DeviceWeights upload_weights(const StoredWeights& w, std::size_t offset_elements = 0) {
  const std::size_t element = dtype_size(w.dtype);
  const std::size_t n = static_cast<std::size_t>(w.rows * w.cols);
  DeviceWeights d{DeviceBuffer<std::uint8_t>((n + offset_elements) * element), {}};
  sync_device();
  SELFSPEC_CUDA_CHECK(cudaMemcpy(d.buffer.get() + offset_elements * element, w.data(), n * element,
                                 cudaMemcpyHostToDevice));
  d.view = DeviceWeight{w.dtype, d.buffer.get() + offset_elements * element, w.rows, w.cols};
  return d;
}

inline cpu::WeightView cpu_view(const StoredWeights& w) {
  return cpu::WeightView{w.dtype, w.data(), w.rows, w.cols};
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// |a − b| <= rel · |b| + abs, element by element; reports the first few failures.
inline void expect_close(const std::vector<float>& actual, const std::vector<float>& expected,
                         double rel, double abs, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int failures = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i];
    const double e = expected[i];
    const bool ok = std::fabs(a - e) <= rel * std::fabs(e) + abs;
    if (!ok && failures < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << a << ", expected " << e;
    }
    failures += ok ? 0 : 1;
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << actual.size() << " differ";
}

}  // namespace selfspec::kernels::cuda::test
