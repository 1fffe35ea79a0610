// A communicator of N ranks that are threads of one process (tests): every collective of the
// Communicator interface, with the same results MpiComm gives (rank-order sums, root-only
// gathers), and optionally the device-buffer collectives on host memory — a stand-in for NCCL
// that lets CPU tests exercise the device-side exchange protocols. Every wait has a deadline, so
// a rank that leaves a collective unmatched fails the test instead of hanging it.
#pragma once

#include "comm/communicator.hpp"
#include "model/llama_model.hpp"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace selfspec::testing {

// The rendezvous the ranks of one ThreadComm group share.
class ThreadHub {
 public:
  explicit ThreadHub(int size);
  int size() const { return size_; }
  // Every rank's bytes, once all ranks have called it (in the same order on every rank).
  std::vector<std::vector<std::byte>> exchange(int rank, std::span<const std::byte> mine);

 private:
  void barrier(std::unique_lock<std::mutex>& lock);

  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::vector<std::byte>> slots_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
};

class ThreadComm final : public Communicator {
 public:
  ThreadComm(ThreadHub& hub, int rank, bool device_buffers);

  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  std::string_view name() const override { return "threads"; }
  void all_reduce_sum(std::span<float> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void gather(std::span<const float> send, std::span<float> recv,
              std::span<const std::int64_t> counts, int root) override;
  void all_gather(std::span<const float> send, std::span<float> recv,
                  std::span<const std::int64_t> counts) override;
  void gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv, int root) override;
  void all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) override;
  void barrier() override;

  bool supports_device_buffers() const override { return device_buffers_; }
  // "Device" memory is host memory here; the stream is ignored.
  void all_reduce_sum_device(float* data, std::size_t count, void* stream) override;
  void all_gather_bytes_device(const void* send, void* recv, std::size_t bytes,
                               void* stream) override;

  // How many device-buffer collectives this rank has joined.
  int device_collectives() const { return device_collectives_; }

 private:
  std::vector<std::byte> concatenated(std::span<const std::byte> mine);

  ThreadHub& hub_;
  int rank_;
  bool device_buffers_;
  int device_collectives_ = 0;
};

// Runs body(comm) on `ranks` threads, one ThreadComm each; rethrows the first rank's exception.
void run_ranks(int ranks, bool device_buffers, const std::function<void(ThreadComm&)>& body);

// Runs body(model, comm) on `ranks` threads, each with the checkpoint in `dir` loaded on its own
// CPU backend (a backend holds its current pass's inputs, and the ranks' passes overlap between
// collectives), once under each reduction order (rank-order, then tp-invariant).
void run_model_ranks_in_both_orders(int ranks, const std::filesystem::path& dir,
                                    const std::function<void(LlamaModel&, ThreadComm&)>& body);

}  // namespace selfspec::testing
