// Communicator over MPI_COMM_WORLD (host buffers). Requires an active MpiRuntime.
#pragma once

#include "comm/communicator.hpp"

#include <vector>

namespace selfspec {

class MpiComm final : public Communicator {
 public:
  MpiComm();
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "mpi"; }
  void all_reduce_sum(std::span<float> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void gather(std::span<const float> send, std::span<float> recv,
              std::span<const std::int64_t> counts, int root) override;
  void all_gather(std::span<const float> send, std::span<float> recv,
                  std::span<const std::int64_t> counts) override;
  void gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv, int root) override;
  void all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) override;
  void barrier() override;

 private:
  int rank_ = 0;
  int size_ = 1;
  std::vector<float> gather_buffer_;
};

}  // namespace selfspec
