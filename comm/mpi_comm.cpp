#include "comm/mpi_comm.hpp"

#include "comm/mpi_check.hpp"
#include "comm/mpi_runtime.hpp"

#include <limits>
#include <numeric>
#include <optional>

namespace selfspec {
namespace {

int checked_count(std::int64_t count, const char* what) {
  SELFSPEC_CHECK(count >= 0 && count <= std::numeric_limits<int>::max(),
                 "{}: element count {} does not fit an MPI count", what, count);
  return static_cast<int>(count);
}

// MPI counts and displacements (int) from 64-bit per-rank counts.
void make_counts_and_displacements(std::span<const std::int64_t> counts, int size,
                                   std::vector<int>& mpi_counts, std::vector<int>& displacements,
                                   const char* what) {
  SELFSPEC_CHECK(static_cast<int>(counts.size()) == size, "{}: {} counts for {} ranks", what,
                 counts.size(), size);
  mpi_counts.resize(static_cast<std::size_t>(size));
  displacements.resize(static_cast<std::size_t>(size));
  std::int64_t offset = 0;
  for (int r = 0; r < size; ++r) {
    mpi_counts[r] = checked_count(counts[r], what);
    displacements[r] = checked_count(offset, what);
    offset += counts[r];
  }
  checked_count(offset, what);
}

}  // namespace

MpiComm::MpiComm(double timeout_s) {
  SELFSPEC_CHECK(MpiRuntime::active(), "MpiComm needs MPI to be initialised (MpiRuntime)");
  SELFSPEC_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  SELFSPEC_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  if (timeout_s <= 0.0) {
    timeout_s = timeout_seconds_from_environment(kCommTimeoutVariable, kDefaultCommTimeoutSeconds);
  }
  if (size_ > 1) watchdog_ = std::make_unique<CollectiveWatchdog>(timeout_s);
}

void MpiComm::all_reduce_sum(std::span<float> data) {
  if (size_ == 1 || data.empty()) return;
  // Gather every rank's contribution and sum in rank order on every rank: the result is
  // bit-identical on all ranks and independent of MPI's reduction algorithm (MPI_Allreduce may
  // associate differently per rank and per message size).
  const int count = checked_count(static_cast<std::int64_t>(data.size()), "all_reduce_sum");
  gather_buffer_.resize(data.size() * static_cast<std::size_t>(size_));
  const auto watch_scope = watch("all_reduce_sum", 0.0);
  SELFSPEC_MPI_CHECK(MPI_Allgather(data.data(), count, MPI_FLOAT, gather_buffer_.data(), count,
                                   MPI_FLOAT, MPI_COMM_WORLD));
  const float* parts = gather_buffer_.data();
  const std::size_t n = data.size();
  for (std::size_t i = 0; i < n; ++i) {
    float sum = parts[i];
    for (int r = 1; r < size_; ++r) sum += parts[static_cast<std::size_t>(r) * n + i];
    data[i] = sum;
  }
}

void MpiComm::broadcast(std::span<std::byte> data, int root) {
  if (size_ == 1 || data.empty()) return;
  const auto watch_scope = watch("broadcast", 0.0);
  SELFSPEC_MPI_CHECK(MPI_Bcast(data.data(),
                               checked_count(static_cast<std::int64_t>(data.size()), "broadcast"),
                               MPI_BYTE, root, MPI_COMM_WORLD));
}

void MpiComm::gather(std::span<const float> send, std::span<float> recv,
                     std::span<const std::int64_t> counts, int root) {
  std::vector<int> mpi_counts;
  std::vector<int> displacements;
  make_counts_and_displacements(counts, size_, mpi_counts, displacements, "gather");
  SELFSPEC_CHECK(static_cast<std::int64_t>(send.size()) == counts[rank_],
                 "gather: rank {} sends {} elements but counts say {}", rank_, send.size(),
                 counts[rank_]);
  if (rank_ == root) {
    SELFSPEC_CHECK(
        recv.size() >= static_cast<std::size_t>(displacements.back() + mpi_counts.back()),
        "gather: receive buffer too small");
  }
  const auto watch_scope = watch("gather", 0.0);
  SELFSPEC_MPI_CHECK(MPI_Gatherv(send.data(), mpi_counts[rank_], MPI_FLOAT, recv.data(),
                                 mpi_counts.data(), displacements.data(), MPI_FLOAT, root,
                                 MPI_COMM_WORLD));
}

void MpiComm::all_gather(std::span<const float> send, std::span<float> recv,
                         std::span<const std::int64_t> counts) {
  std::vector<int> mpi_counts;
  std::vector<int> displacements;
  make_counts_and_displacements(counts, size_, mpi_counts, displacements, "all_gather");
  SELFSPEC_CHECK(static_cast<std::int64_t>(send.size()) == counts[rank_],
                 "all_gather: rank {} sends {} elements but counts say {}", rank_, send.size(),
                 counts[rank_]);
  SELFSPEC_CHECK(recv.size() >= static_cast<std::size_t>(displacements.back() + mpi_counts.back()),
                 "all_gather: receive buffer too small");
  const auto watch_scope = watch("all_gather", 0.0);
  SELFSPEC_MPI_CHECK(MPI_Allgatherv(send.data(), mpi_counts[rank_], MPI_FLOAT, recv.data(),
                                    mpi_counts.data(), displacements.data(), MPI_FLOAT,
                                    MPI_COMM_WORLD));
}

void MpiComm::gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv, int root) {
  const int count = checked_count(static_cast<std::int64_t>(send.size()), "gather_bytes");
  if (rank_ == root) {
    SELFSPEC_CHECK(recv.size() >= send.size() * static_cast<std::size_t>(size_),
                   "gather_bytes: receive buffer too small");
  }
  const auto watch_scope = watch("gather_bytes", 0.0);
  SELFSPEC_MPI_CHECK(
      MPI_Gather(send.data(), count, MPI_BYTE, recv.data(), count, MPI_BYTE, root, MPI_COMM_WORLD));
}

void MpiComm::all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) {
  SELFSPEC_CHECK(static_cast<int>(values.size()) == size_, "all_gather_u64: {} slots for {} ranks",
                 values.size(), size_);
  const auto watch_scope = watch("all_gather_u64", 0.0);
  SELFSPEC_MPI_CHECK(
      MPI_Allgather(&value, 1, MPI_UINT64_T, values.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD));
}

void MpiComm::barrier() {
  const auto watch_scope = watch("barrier", 0.0);
  SELFSPEC_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

std::optional<CollectiveWatchdog::Scope> MpiComm::watch(const char* what, double timeout_s) {
  if (!watchdog_) return std::nullopt;
  return std::optional<CollectiveWatchdog::Scope>(
      std::in_place, *watchdog_, what, timeout_s > 0.0 ? timeout_s : watchdog_->timeout_seconds());
}

void MpiComm::wait_for_peers(const char* what, double timeout_s) {
  const auto watch_scope = watch(what, timeout_s);
  SELFSPEC_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

}  // namespace selfspec
