#include "comm/local_comm.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace selfspec {

void LocalComm::all_reduce_sum(std::span<float> /*data*/) {}

void LocalComm::broadcast(std::span<std::byte> /*data*/, int root) {
  SELFSPEC_CHECK(root == 0, "broadcast root {} does not exist in a 1-rank job", root);
}

void LocalComm::gather(std::span<const float> send, std::span<float> recv,
                       std::span<const std::int64_t> counts, int root) {
  SELFSPEC_CHECK(root == 0, "gather root {} does not exist in a 1-rank job", root);
  all_gather(send, recv, counts);
}

void LocalComm::all_gather(std::span<const float> send, std::span<float> recv,
                           std::span<const std::int64_t> counts) {
  SELFSPEC_CHECK(counts.size() == 1 && counts[0] == static_cast<std::int64_t>(send.size()) &&
                     recv.size() >= send.size(),
                 "all_gather: counts/buffer sizes do not match a 1-rank job");
  std::copy(send.begin(), send.end(), recv.begin());
}

void LocalComm::gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv, int root) {
  SELFSPEC_CHECK(root == 0, "gather root {} does not exist in a 1-rank job", root);
  SELFSPEC_CHECK(recv.size() >= send.size(), "gather_bytes: receive buffer too small");
  std::copy(send.begin(), send.end(), recv.begin());
}

void LocalComm::all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) {
  SELFSPEC_CHECK(values.size() == 1, "all_gather_u64 needs exactly 1 slot in a 1-rank job");
  values[0] = value;
}

}  // namespace selfspec
