// A communicator for several ranks that are threads of one process sharing one GPU (tests): the
// host collectives of ThreadComm, and the device-buffer collectives (what NcclComm does on the
// GPU) staged through host memory - wait for the rank's stream, copy the device buffer to the
// host, exchange with ThreadComm, copy back. NCCL refuses two ranks on one device, so this is how
// the GPU tests run the sharded paths (TP > 1 forwards, vocab-sharded logits, device-side
// verification's exchanges, rank 0's control) on a one-GPU machine. Its device collectives wait
// on the stream, so forwards over it are not recorded as CUDA graphs
// (device_collectives_recordable() is false).
#pragma once

#include "tests/support/forwarding_comm.hpp"
#include "tests/support/thread_comm.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace selfspec::testing {

// Its ThreadComm, built before the ForwardingComm base that forwards to it.
struct ThreadCommMember {
  ThreadCommMember(ThreadHub& hub, int rank) : thread(hub, rank, false) {}
  ThreadComm thread;
};

class CudaStagedComm final : private ThreadCommMember, public ForwardingComm {
 public:
  CudaStagedComm(ThreadHub& hub, int rank) : ThreadCommMember(hub, rank), ForwardingComm(thread) {}

  std::string_view name() const override { return "threads (device buffers staged through host)"; }

  bool supports_device_buffers() const override { return true; }
  bool device_collectives_recordable() const override { return false; }
  void all_reduce_sum_device(float* data, std::size_t count, void* stream) override;
  void all_gather_bytes_device(const void* send, void* recv, std::size_t bytes,
                               void* stream) override;

  // How many device-buffer collectives this rank has joined.
  int device_collectives() const { return device_collectives_; }

 private:
  int device_collectives_ = 0;
};

}  // namespace selfspec::testing
