// The communicator of a single rank: every collective is the identity.
#pragma once

#include "comm/communicator.hpp"

namespace selfspec {

class LocalComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view name() const override { return "local"; }
  void all_reduce_sum(std::span<float> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void gather(std::span<const float> send, std::span<float> recv,
              std::span<const std::int64_t> counts, int root) override;
  void all_gather(std::span<const float> send, std::span<float> recv,
                  std::span<const std::int64_t> counts) override;
  void gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv, int root) override;
  void all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) override;
  void barrier() override {}
};

}  // namespace selfspec
