// A communicator for several ranks that are threads of one process sharing one GPU (tests): the
// host collectives of ThreadComm, and the device-buffer collectives (what NcclComm does on the
// GPU) staged through host memory - wait for the rank's stream, copy the device buffer to the
// host, exchange with ThreadComm, copy back. NCCL refuses two ranks on one device, so this is how
// the GPU tests run the sharded paths (TP > 1 forwards, vocab-sharded logits, device-side
// verification's exchanges, rank 0's control) on a one-GPU machine. Its device collectives wait
// on the stream, so forwards over it are not recorded as CUDA graphs
// (device_collectives_recordable() is false).
#pragma once

#include "comm/communicator.hpp"
#include "tests/support/thread_comm.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace selfspec::testing {

class CudaStagedComm final : public Communicator {
 public:
  CudaStagedComm(ThreadHub& hub, int rank) : inner_(hub, rank, false) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view name() const override { return "threads (device buffers staged through host)"; }
  void all_reduce_sum(std::span<float> data) override { inner_.all_reduce_sum(data); }
  void broadcast(std::span<std::byte> data, int root) override { inner_.broadcast(data, root); }
  void gather(std::span<const float> send, std::span<float> recv,
              std::span<const std::int64_t> counts, int root) override {
    inner_.gather(send, recv, counts, root);
  }
  void all_gather(std::span<const float> send, std::span<float> recv,
                  std::span<const std::int64_t> counts) override {
    inner_.all_gather(send, recv, counts);
  }
  void gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv, int root) override {
    inner_.gather_bytes(send, recv, root);
  }
  void all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) override {
    inner_.all_gather_u64(value, values);
  }
  void barrier() override { inner_.barrier(); }

  bool supports_device_buffers() const override { return true; }
  bool device_collectives_recordable() const override { return false; }
  void all_reduce_sum_device(float* data, std::size_t count, void* stream) override;
  void all_gather_bytes_device(const void* send, void* recv, std::size_t bytes,
                               void* stream) override;

  // How many device-buffer collectives this rank has joined.
  int device_collectives() const { return device_collectives_; }

 private:
  ThreadComm inner_;
  int device_collectives_ = 0;
};

}  // namespace selfspec::testing
