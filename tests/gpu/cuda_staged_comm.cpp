#include "tests/gpu/cuda_staged_comm.hpp"

#include "core/cuda_check.hpp"

#include <cuda_runtime.h>

#include <vector>

namespace selfspec::testing {

void CudaStagedComm::all_reduce_sum_device(float* data, std::size_t count, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  std::vector<float> host(count);
  // The stream's work (the kernel that wrote the buffer) first: a non-blocking stream is not
  // ordered with the legacy stream's copies.
  SELFSPEC_CUDA_CHECK(cudaStreamSynchronize(s));
  SELFSPEC_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost, s));
  SELFSPEC_CUDA_CHECK(cudaStreamSynchronize(s));
  inner().all_reduce_sum(host);
  SELFSPEC_CUDA_CHECK(
      cudaMemcpyAsync(data, host.data(), count * sizeof(float), cudaMemcpyHostToDevice, s));
  SELFSPEC_CUDA_CHECK(cudaStreamSynchronize(s));  // host is freed on return
  ++device_collectives_;
}

void CudaStagedComm::all_gather_bytes_device(const void* send, void* recv, std::size_t bytes,
                                             void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const auto ranks = static_cast<std::size_t>(size());
  std::vector<std::byte> all(ranks * bytes);
  const std::size_t mine = static_cast<std::size_t>(rank()) * bytes;
  SELFSPEC_CUDA_CHECK(cudaStreamSynchronize(s));
  SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(all.data() + mine, send, bytes, cudaMemcpyDeviceToHost, s));
  SELFSPEC_CUDA_CHECK(cudaStreamSynchronize(s));
  for (std::size_t r = 0; r < ranks; ++r) {
    inner().broadcast(std::span(all).subspan(r * bytes, bytes), static_cast<int>(r));
  }
  SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(recv, all.data(), all.size(), cudaMemcpyHostToDevice, s));
  SELFSPEC_CUDA_CHECK(cudaStreamSynchronize(s));
  ++device_collectives_;
}

}  // namespace selfspec::testing
