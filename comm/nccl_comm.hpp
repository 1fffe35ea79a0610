// Communicator over NCCL: one GPU per rank, the ranks of a bootstrap communicator (MpiComm over
// MPI_COMM_WORLD; a LocalComm for a single rank, as in a build without MPI), which carries the
// ncclUniqueId from rank 0 to the others.
//
// Device buffers: all_reduce_sum_device() enqueues an in-place ncclAllReduce on the caller's
// stream and returns without waiting, so it can be captured in a CUDA graph; wait(stream) then
// waits for that stream under the watchdog.
//
// Host buffers (the rest of the Communicator interface): the data travel through staging buffers
// owned by the communicator (pinned host memory and device memory, grown on demand) on its own
// stream: host -> device copy, NCCL collective, device -> host copy, one watched wait.
//   * all_reduce_sum gathers every rank's contribution (ncclAllGather) and sums on the host in
//     rank order 0..n-1, like MpiComm: the result is bit-identical on every rank and to MpiComm's.
//     (NCCL's own sum is deterministic for a fixed configuration but associates in an order that
//     depends on the algorithm, channel count and rank, and NCCL documents no cross-rank or
//     cross-configuration guarantee; it is used for the device path only.)
//   * all_gather with uneven counts pads every rank's block to the largest count and runs one
//     ncclAllGather (tensor-parallel shards differ by a few elements, so the padding is cheap and
//     NCCL's ring/NVLS algorithms apply); gather and gather_bytes to a root are grouped
//     ncclSend/ncclRecv (only the root receives).
//
// Watchdog: every wait polls cudaStreamQuery and ncclCommGetAsyncError until the work is done,
// NCCL reports an asynchronous error, or a deadline passes (default 120 s; the environment
// variable SELFSPEC_NCCL_TIMEOUT_S overrides it). On an error or the deadline the communicator is
// aborted (ncclCommAbort, which also ends NCCL kernels still waiting for a peer) and a
// selfspec::Error is thrown, so launch/ can end the job instead of hanging. The communicator is
// created non-blocking (config.blocking = 0) so that initialisation and every enqueue can be
// completed under the same deadline. After any failure the communicator is aborted and every
// further call throws.
//
// The header includes neither nccl.h nor CUDA headers (streams are passed as void*).
#pragma once

#include "comm/communicator.hpp"
#include "core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace selfspec {

// The watchdog's deadline logic, free of CUDA and NCCL so that it is testable on the CPU.
namespace nccl_watchdog {

inline constexpr double kDefaultTimeoutSeconds = 120.0;
inline constexpr const char* kTimeoutEnvironmentVariable = "SELFSPEC_NCCL_TIMEOUT_S";

// The timeout given by the text of SELFSPEC_NCCL_TIMEOUT_S: the default when `text` is null or
// empty; throws selfspec::Error unless it is a finite number of seconds > 0.
double parse_timeout_seconds(const char* text);
// parse_timeout_seconds(getenv(SELFSPEC_NCCL_TIMEOUT_S)).
double timeout_seconds_from_environment();

enum class PollState { kPending, kDone, kFailed };
enum class WaitOutcome { kDone, kFailed, kTimedOut };

// Calls poll() until it reports done or failed, or until `timeout_s` seconds of now_s() (a
// monotonic clock in seconds) have passed since the first call; between polls calls idle(i) with
// the number of polls so far. poll() is always called at least once, and once more after the
// last idle, so work that completes right at the deadline counts as done.
template <typename Poll, typename Clock, typename Idle>
WaitOutcome poll_until_deadline(Poll&& poll, double timeout_s, Clock&& now_s, Idle&& idle) {
  const double start = now_s();
  for (std::int64_t polls = 1;; ++polls) {
    const PollState state = poll();
    if (state == PollState::kDone) return WaitOutcome::kDone;
    if (state == PollState::kFailed) return WaitOutcome::kFailed;
    if (now_s() - start >= timeout_s) return WaitOutcome::kTimedOut;
    idle(polls);
  }
}

// Seconds on std::chrono::steady_clock.
double steady_seconds();
// The idle step of a real wait: yields for the first polls (low latency for short collectives),
// then sleeps a little (a long wait does not burn a core).
void backoff(std::int64_t polls);

}  // namespace nccl_watchdog

class NcclComm final : public Communicator {
 public:
  // Collective over `bootstrap`'s ranks: rank r of bootstrap becomes NCCL rank r on CUDA device
  // `device` (made current on the calling thread). The watchdog timeout comes from
  // SELFSPEC_NCCL_TIMEOUT_S (default 120 s).
  NcclComm(Communicator& bootstrap, int device);
  // The same with an explicit watchdog timeout in seconds (> 0).
  NcclComm(Communicator& bootstrap, int device, double timeout_s);
  // Finalises and destroys the NCCL communicator (aborts it instead when it failed before, when
  // finalising does not complete within the timeout, or during stack unwinding, where a peer may
  // be gone). Never throws.
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "nccl"; }

  void all_reduce_sum(std::span<float> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void gather(std::span<const float> send, std::span<float> recv,
              std::span<const std::int64_t> counts, int root) override;
  void all_gather(std::span<const float> send, std::span<float> recv,
                  std::span<const std::int64_t> counts) override;
  void gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv, int root) override;
  void all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) override;
  void barrier() override;

  bool supports_device_buffers() const override { return true; }
  // In-place ncclAllReduce (ncclFloat, ncclSum) of `count` floats in device memory, enqueued on
  // `stream` (a cudaStream_t; null = the legacy default stream). Does not synchronise.
  void all_reduce_sum_device(float* data, std::size_t count, void* stream) override;
  // ncclAllGather of `bytes` bytes per rank (ncclUint8) on `stream`. Does not synchronise.
  void all_gather_bytes_device(const void* send, void* recv, std::size_t bytes,
                               void* stream) override;
  // The same for a device buffer of f32, bf16 or f16 elements (summed by NCCL in that type).
  void all_reduce_device(void* data, std::size_t count, DType dtype, void* stream);

  // Waits until all work enqueued on `stream` has completed, under the watchdog: throws
  // selfspec::Error (after aborting the communicator) on an NCCL asynchronous error, a CUDA error
  // or when the stream does not drain within the timeout.
  void wait(void* stream);

  int device() const { return device_; }
  double timeout_seconds() const { return timeout_s_; }
  // True once a failure or a timeout has aborted the communicator.
  bool aborted() const;

 private:
  struct Resources;  // the ncclComm_t, the stream and the staging buffers (nccl_comm.cpp)

  // Runs a collective's body; any exception aborts the communicator before it propagates, so a
  // half-enqueued collective never leaves the ranks out of step.
  template <typename Body>
  void guarded(std::string_view what, Body&& body);
  void ensure_usable(std::string_view what) const;
  void check_root(int root, std::string_view what) const;
  // Waits for the communicator's own stream (watchdog).
  void wait_own_stream(std::string_view what);
  void wait_stream(void* stream, std::string_view what);
  // Concatenates the ranks' byte blocks (byte_counts[r] bytes from rank r) on root / on every
  // rank; counts are validated by the callers.
  void gather_blocks(const std::byte* send, std::byte* recv,
                     std::span<const std::int64_t> byte_counts, int root, std::string_view what);
  void all_gather_blocks(const std::byte* send, std::byte* recv,
                         std::span<const std::int64_t> byte_counts, std::string_view what);

  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  double timeout_s_ = nccl_watchdog::kDefaultTimeoutSeconds;
  std::unique_ptr<Resources> resources_;
};

}  // namespace selfspec
