// A communicator that forwards every host collective to another one (tests): a decorator derives
// from it and overrides only what it changes (a corrupted message, device-buffer collectives staged
// through the host).
#pragma once

#include "comm/communicator.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace selfspec::testing {

class ForwardingComm : public Communicator {
 public:
  explicit ForwardingComm(Communicator& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
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

 protected:
  Communicator& inner() { return inner_; }

 private:
  Communicator& inner_;
};

}  // namespace selfspec::testing
