// Communicator over MPI_COMM_WORLD (host buffers). Requires an active MpiRuntime.
// With several ranks, every collective runs under a CollectiveWatchdog (collective_watchdog.hpp):
// a collective that waits longer than SELFSPEC_COMM_TIMEOUT_S for a hung peer ends the job.
#pragma once

#include "comm/collective_watchdog.hpp"
#include "comm/communicator.hpp"

#include <memory>
#include <optional>
#include <vector>

namespace selfspec {

class MpiComm final : public Communicator {
 public:
  // timeout_s <= 0: SELFSPEC_COMM_TIMEOUT_S, default kDefaultCommTimeoutSeconds.
  explicit MpiComm(double timeout_s = 0.0);
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
  void wait_for_peers(const char* what, double timeout_s) override;

 private:
  // Arms the watchdog for one collective (nullopt with a single rank); timeout_s <= 0: its default.
  std::optional<CollectiveWatchdog::Scope> watch(const char* what, double timeout_s);

  int rank_ = 0;
  int size_ = 1;
  std::vector<float> gather_buffer_;
  std::unique_ptr<CollectiveWatchdog> watchdog_;  // only with several ranks
};

}  // namespace selfspec
