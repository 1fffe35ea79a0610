// NcclComm: the NCCL communicator (design in nccl_comm.hpp: staging of host buffers, the
// rank-ordered host all-reduce, padded uneven all-gather, the watchdog).
//
// NCCL's non-blocking mode (config.blocking = 0): any call on the communicator may return
// ncclInProgress, meaning the operation is still being set up on the host; it must then be
// completed by polling ncclCommGetAsyncError until that no longer reports ncclInProgress, before
// the next NCCL call on the communicator. settle() does this under the deadline. Calls inside a
// ncclGroupStart/ncclGroupEnd pair are completed by the ncclGroupEnd; nothing between the two
// throws (errors are noted and raised after ncclGroupEnd), so a group is never left open.
#include "comm/nccl_comm.hpp"

#include "comm/nccl_check.hpp"
#include "core/cuda_check.hpp"
#include "core/error.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace selfspec {

// ---------------------------------------------------------------------------------------------
// Watchdog helpers
// ---------------------------------------------------------------------------------------------
namespace nccl_watchdog {

double parse_timeout_seconds(const char* text) {
  if (text == nullptr || text[0] == '\0') return kDefaultTimeoutSeconds;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(value) || value <= 0.0) {
    fail("{}='{}' is not a positive number of seconds", kTimeoutEnvironmentVariable, text);
  }
  return value;
}

double timeout_seconds_from_environment() {
  return parse_timeout_seconds(std::getenv(kTimeoutEnvironmentVariable));
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void backoff(std::int64_t polls) {
  // About the first millisecond yields (a small collective completes in tens of microseconds);
  // after that, 100 us sleeps.
  if (polls < 2000) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace nccl_watchdog

namespace {

using nccl_watchdog::PollState;
using nccl_watchdog::WaitOutcome;

[[noreturn]] void throw_timeout(std::string_view what, double timeout_s, int rank) {
  fail(
      "NCCL {} did not complete within {:g} s on rank {} (a peer rank may have died; {} sets "
      "the deadline)",
      what, timeout_s, rank, nccl_watchdog::kTimeoutEnvironmentVariable);
}

// Polls the communicator's asynchronous state until it leaves ncclInProgress; `state` receives
// the final state (or the failure of the query itself).
WaitOutcome poll_async_state(ncclComm_t comm, double timeout_s, ncclResult_t& state) {
  return nccl_watchdog::poll_until_deadline(
      [&] {
        const ncclResult_t query = ncclCommGetAsyncError(comm, &state);
        if (query != ncclSuccess) {
          state = query;
          return PollState::kFailed;
        }
        if (state == ncclInProgress) return PollState::kPending;
        return state == ncclSuccess ? PollState::kDone : PollState::kFailed;
      },
      timeout_s, nccl_watchdog::steady_seconds, nccl_watchdog::backoff);
}

// Completes a call on the non-blocking communicator (see the top comment). Throws on an error or
// at the deadline; the caller aborts the communicator.
void settle(ncclComm_t comm, ncclResult_t rc, const char* statement, const char* file, int line,
            double timeout_s, int rank, std::string_view what) {
  if (rc == ncclSuccess) return;
  if (rc != ncclInProgress) {
    detail::api_call_failed("NCCL", statement, detail::nccl_error_detail(rc, comm), file, line);
  }
  ncclResult_t state = ncclInProgress;
  switch (poll_async_state(comm, timeout_s, state)) {
    case WaitOutcome::kDone:
      return;
    case WaitOutcome::kFailed:
      detail::api_call_failed("NCCL", statement, detail::nccl_error_detail(state, comm), file,
                              line);
    case WaitOutcome::kTimedOut:
      throw_timeout(what, timeout_s, rank);
  }
}

// Device memory (stream-ordered: cudaMallocAsync / cudaFreeAsync on the communicator's stream, so
// that growing it does not synchronise the device) or pinned host memory, grown on demand to at
// least kMinimumBytes (control messages never cause a reallocation); contents are not kept.
class StagingBuffer {
 public:
  enum class Kind { kDevice, kPinnedHost };
  static constexpr std::size_t kMinimumBytes = std::size_t{64} << 10;

  StagingBuffer(Kind kind, cudaStream_t stream) : kind_(kind), stream_(stream) {}
  ~StagingBuffer() { release(); }
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  // At least `bytes` bytes (null for 0 bytes when nothing was reserved before).
  std::byte* reserve(std::size_t bytes) {
    if (bytes <= capacity_) return data_;
    const std::size_t capacity = std::max({bytes, capacity_ * 2, kMinimumBytes});
    release();
    void* memory = nullptr;
    if (kind_ == Kind::kDevice) {
      SELFSPEC_CUDA_CHECK(cudaMallocAsync(&memory, capacity, stream_));
    } else {
      SELFSPEC_CUDA_CHECK(cudaMallocHost(&memory, capacity));
    }
    data_ = static_cast<std::byte*>(memory);
    capacity_ = capacity;
    return data_;
  }

  // Forgets the memory without freeing it: after an abort, freeing could block on the very work
  // that hung (cudaFreeHost synchronises), and the job is about to end anyway.
  void leak() {
    data_ = nullptr;
    capacity_ = 0;
  }

 private:
  void release() noexcept {
    if (data_ != nullptr) {
      if (kind_ == Kind::kDevice) {
        (void)cudaFreeAsync(data_, stream_);
      } else {
        (void)cudaFreeHost(data_);
      }
    }
    data_ = nullptr;
    capacity_ = 0;
  }

  Kind kind_;
  cudaStream_t stream_;
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
};

// A non-blocking CUDA stream (no implicit synchronisation with the legacy default stream).
class OwnedStream {
 public:
  OwnedStream() { SELFSPEC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~OwnedStream() {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Owns the ncclComm_t: close() finalises and destroys it, abort() aborts it.
class CommHandle {
 public:
  CommHandle() = default;
  ~CommHandle() { abort(); }  // close() is called first on the normal path
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;

  ncclComm_t get() const { return comm_; }
  ncclComm_t* out() { return &comm_; }
  bool aborted() const { return aborted_; }

  void abort() noexcept {
    if (comm_ != nullptr) {
      (void)ncclCommAbort(comm_);
      aborted_ = true;
    }
    comm_ = nullptr;
  }

  // Flushes the operations still enqueued (ncclCommFinalize), then destroys the communicator;
  // aborts it instead when finalising fails or does not complete within timeout_s. Returns false
  // when it had to abort.
  bool close(double timeout_s) noexcept {
    if (comm_ == nullptr) return !aborted_;
    const ncclResult_t rc = ncclCommFinalize(comm_);
    bool finalised = rc == ncclSuccess;
    if (rc == ncclInProgress) {
      ncclResult_t state = ncclInProgress;
      finalised = poll_async_state(comm_, timeout_s, state) == WaitOutcome::kDone;
    }
    if (!finalised) {
      abort();
      return false;
    }
    (void)ncclCommDestroy(comm_);
    comm_ = nullptr;
    return true;
  }

 private:
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
};

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
  }
  fail("NcclComm: unsupported dtype {}", static_cast<int>(dtype));
}

// Per-rank byte counts from per-rank float counts, after checking them against the interface's
// contract (one count per rank, non-negative, this rank's matches its send buffer).
std::vector<std::int64_t> float_byte_counts(std::span<const std::int64_t> counts, int size,
                                            int rank, std::size_t send_count,
                                            std::string_view what) {
  SELFSPEC_CHECK(static_cast<int>(counts.size()) == size, "{}: {} counts for {} ranks", what,
                 counts.size(), size);
  std::vector<std::int64_t> bytes(counts.size());
  std::int64_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    const std::int64_t limit = std::numeric_limits<std::int64_t>::max() / 4 - total;
    SELFSPEC_CHECK(counts[r] >= 0 && counts[r] <= limit, "{}: invalid count {} for rank {}", what,
                   counts[r], r);
    total += counts[r];
    bytes[r] = counts[r] * static_cast<std::int64_t>(sizeof(float));
  }
  SELFSPEC_CHECK(static_cast<std::int64_t>(send_count) == counts[static_cast<std::size_t>(rank)],
                 "{}: rank {} sends {} elements but counts say {}", what, rank, send_count,
                 counts[static_cast<std::size_t>(rank)]);
  return bytes;
}

std::size_t total_of(std::span<const std::int64_t> counts) {
  std::int64_t total = 0;
  for (std::int64_t c : counts) total += c;
  return static_cast<std::size_t>(total);
}

}  // namespace

// Completes an NCCL call of a collective (ncclInProgress -> poll under the deadline). The call is
// made first: it may be the one that creates the communicator passed to settle().
#define SELFSPEC_NCCL_SETTLE(statement, what)                                                     \
  do {                                                                                            \
    const ncclResult_t selfspec_nccl_rc_ = (statement);                                           \
    settle(resources_->comm.get(), selfspec_nccl_rc_, #statement, __FILE__, __LINE__, timeout_s_, \
           rank_, (what));                                                                        \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------------------------
struct NcclComm::Resources {
  Resources(int device_index, double timeout) : device(device_index), timeout_s(timeout) {}
  ~Resources() {
    (void)cudaSetDevice(device);
    if (!comm.close(timeout_s)) {
      host_send.leak();
      host_recv.leak();
      device_send.leak();
      device_recv.leak();
    }
  }
  Resources(const Resources&) = delete;
  Resources& operator=(const Resources&) = delete;

  int device;
  double timeout_s;
  OwnedStream stream;  // declared first: destroyed last, after the buffers freed on it
  StagingBuffer host_send{StagingBuffer::Kind::kPinnedHost, stream.get()};
  StagingBuffer host_recv{StagingBuffer::Kind::kPinnedHost, stream.get()};
  StagingBuffer device_send{StagingBuffer::Kind::kDevice, stream.get()};
  StagingBuffer device_recv{StagingBuffer::Kind::kDevice, stream.get()};
  std::vector<float> gathered;  // all_reduce_sum: every rank's contribution, rank after rank
  CommHandle comm;  // declared last: closed (in ~Resources) before anything else is released
};

// ---------------------------------------------------------------------------------------------
// Construction and destruction
// ---------------------------------------------------------------------------------------------
NcclComm::NcclComm(Communicator& bootstrap, int device)
    : NcclComm(bootstrap, device, nccl_watchdog::timeout_seconds_from_environment()) {}

NcclComm::NcclComm(Communicator& bootstrap, int device, double timeout_s)
    : rank_(bootstrap.rank()), size_(bootstrap.size()), device_(device), timeout_s_(timeout_s) {
  SELFSPEC_CHECK(std::isfinite(timeout_s) && timeout_s > 0.0,
                 "NcclComm: the watchdog timeout must be a positive number of seconds (got {})",
                 timeout_s);

  // The unique id, created on rank 0 and broadcast with a success flag, so that a failure there
  // becomes an error on every rank rather than a hang in ncclCommInitRankConfig.
  struct IdMessage {
    std::int32_t ok = 0;
    ncclUniqueId id{};
  };
  IdMessage message;
  std::string id_error;
  if (rank_ == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&message.id);
    message.ok = rc == ncclSuccess ? 1 : 0;
    if (rc != ncclSuccess) id_error = detail::nccl_error_detail(rc, nullptr);
  }
  bootstrap.broadcast_object(message, 0);
  if (message.ok == 0) {
    if (rank_ == 0) {
      detail::api_call_failed("NCCL", "ncclGetUniqueId(&message.id)", id_error, __FILE__, __LINE__);
    }
    fail("NcclComm: rank 0 could not create the NCCL unique id (see rank 0's error)");
  }

  int device_count = 0;
  SELFSPEC_CUDA_CHECK(cudaGetDeviceCount(&device_count));
  SELFSPEC_CHECK(device >= 0 && device < device_count,
                 "NcclComm: rank {} was given CUDA device {}, but {} device(s) are visible", rank_,
                 device, device_count);
  SELFSPEC_CUDA_CHECK(cudaSetDevice(device));
  resources_ = std::make_unique<Resources>(device, timeout_s);

  // Non-blocking, so that an initialisation waiting for a rank that never joins can be abandoned
  // at the deadline (ncclCommAbort) instead of hanging.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  try {
    SELFSPEC_NCCL_SETTLE(
        ncclCommInitRankConfig(resources_->comm.out(), size_, message.id, rank_, &config),
        "communicator initialisation");
  } catch (...) {
    resources_->comm.abort();
    throw;
  }
}

NcclComm::~NcclComm() {
  // During stack unwinding an error is on its way to launch/, which ends the job; a peer may be
  // gone, so finalising would only wait for the deadline.
  if (resources_ && std::uncaught_exceptions() > 0) resources_->comm.abort();
  resources_.reset();
}

bool NcclComm::aborted() const {
  return resources_->comm.aborted();
}

// ---------------------------------------------------------------------------------------------
// Shared machinery
// ---------------------------------------------------------------------------------------------
template <typename Body>
void NcclComm::guarded(std::string_view what, Body&& body) {
  ensure_usable(what);
  try {
    body();
  } catch (...) {
    resources_->comm.abort();
    throw;
  }
}

void NcclComm::ensure_usable(std::string_view what) const {
  SELFSPEC_CHECK(!resources_->comm.aborted(),
                 "NcclComm::{} on rank {}: the communicator was aborted after an earlier failure",
                 what, rank_);
}

void NcclComm::check_root(int root, std::string_view what) const {
  SELFSPEC_CHECK(root >= 0 && root < size_, "{}: root {} is not a rank of {}", what, root, size_);
}

void NcclComm::wait_own_stream(std::string_view what) {
  wait_stream(resources_->stream.get(), what);
}

void NcclComm::wait_stream(void* stream, std::string_view what) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const ncclComm_t comm = resources_->comm.get();
  cudaError_t cuda_error = cudaSuccess;
  ncclResult_t nccl_error = ncclSuccess;
  const WaitOutcome outcome = nccl_watchdog::poll_until_deadline(
      [&] {
        const cudaError_t query = cudaStreamQuery(cuda_stream);
        if (query == cudaSuccess) return PollState::kDone;
        if (query != cudaErrorNotReady) {
          cuda_error = query;
          return PollState::kFailed;
        }
        // "Not ready" is not a failure; clear it from the thread's last error so that a later
        // cudaGetLastError() after a kernel launch does not report it, but keep a real one.
        const cudaError_t last = cudaGetLastError();
        if (last != cudaSuccess && last != cudaErrorNotReady) {
          cuda_error = last;
          return PollState::kFailed;
        }
        ncclResult_t state = ncclSuccess;
        const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
        if (rc != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
          nccl_error = rc != ncclSuccess ? rc : state;
          return PollState::kFailed;
        }
        return PollState::kPending;
      },
      timeout_s_, nccl_watchdog::steady_seconds, nccl_watchdog::backoff);
  switch (outcome) {
    case WaitOutcome::kDone:
      return;
    case WaitOutcome::kFailed:
      if (cuda_error != cudaSuccess) {
        detail::api_call_failed("CUDA", fmt::format("cudaStreamQuery (waiting for {})", what),
                                cudaGetErrorString(cuda_error), __FILE__, __LINE__);
      }
      detail::api_call_failed("NCCL", fmt::format("ncclCommGetAsyncError (waiting for {})", what),
                              detail::nccl_error_detail(nccl_error, comm), __FILE__, __LINE__);
    case WaitOutcome::kTimedOut:
      throw_timeout(what, timeout_s_, rank_);
  }
}

void NcclComm::gather_blocks(const std::byte* send, std::byte* recv,
                             std::span<const std::int64_t> byte_counts, int root,
                             std::string_view what) {
  Resources& res = *resources_;
  const cudaStream_t stream = res.stream.get();
  const ncclComm_t comm = res.comm.get();
  std::vector<std::size_t> offsets(static_cast<std::size_t>(size_) + 1, 0);
  for (int r = 0; r < size_; ++r) {
    offsets[r + 1] = offsets[r] + static_cast<std::size_t>(byte_counts[r]);
  }
  const std::size_t total = offsets.back();
  const auto mine = static_cast<std::size_t>(byte_counts[rank_]);

  if (rank_ != root) {
    if (mine == 0) return;  // nothing to send; the root posts no receive for this rank either
    std::byte* host = res.host_send.reserve(mine);
    std::memcpy(host, send, mine);
    std::byte* device = res.device_send.reserve(mine);
    SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(device, host, mine, cudaMemcpyHostToDevice, stream));
    SELFSPEC_NCCL_SETTLE(ncclSend(device, mine, ncclUint8, root, comm, stream), what);
    wait_own_stream(what);
    return;
  }

  if (total > mine) {
    std::byte* device = res.device_recv.reserve(total);
    SELFSPEC_NCCL_CHECK_COMM(ncclGroupStart(), comm);
    ncclResult_t first_error = ncclSuccess;
    for (int r = 0; r < size_; ++r) {
      if (r == root || byte_counts[r] == 0) continue;
      const ncclResult_t rc =
          ncclRecv(device + offsets[r], static_cast<std::size_t>(byte_counts[r]), ncclUint8, r,
                   comm, stream);
      if (rc != ncclSuccess && rc != ncclInProgress && first_error == ncclSuccess) {
        first_error = rc;
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    if (first_error != ncclSuccess) {
      detail::api_call_failed("NCCL", "ncclRecv(...) in a group",
                              detail::nccl_error_detail(first_error, comm), __FILE__, __LINE__);
    }
    settle(comm, end, "ncclGroupEnd() after ncclRecv from every rank", __FILE__, __LINE__,
           timeout_s_, rank_, what);
    std::byte* host = res.host_recv.reserve(total);
    SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(host, device, total, cudaMemcpyDeviceToHost, stream));
    wait_own_stream(what);
    std::memcpy(recv, host, total);  // the root's own slot is garbage here, overwritten below
  }
  if (mine > 0) std::memcpy(recv + offsets[root], send, mine);
}

void NcclComm::all_gather_blocks(const std::byte* send, std::byte* recv,
                                 std::span<const std::int64_t> byte_counts, std::string_view what) {
  Resources& res = *resources_;
  const cudaStream_t stream = res.stream.get();
  const ncclComm_t comm = res.comm.get();
  const auto mine = static_cast<std::size_t>(byte_counts[rank_]);
  const auto block =
      static_cast<std::size_t>(*std::max_element(byte_counts.begin(), byte_counts.end()));
  if (block == 0) return;

  // Every rank contributes a block of the largest size (its data, then zeros).
  std::byte* device_send = res.device_send.reserve(block);
  if (mine > 0) {
    std::byte* host = res.host_send.reserve(mine);
    std::memcpy(host, send, mine);
    SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(device_send, host, mine, cudaMemcpyHostToDevice, stream));
  }
  if (mine < block) {
    SELFSPEC_CUDA_CHECK(cudaMemsetAsync(device_send + mine, 0, block - mine, stream));
  }
  const std::size_t padded = block * static_cast<std::size_t>(size_);
  std::byte* device_recv = res.device_recv.reserve(padded);
  SELFSPEC_NCCL_SETTLE(ncclAllGather(device_send, device_recv, block, ncclUint8, comm, stream),
                       what);
  std::byte* host = res.host_recv.reserve(padded);
  SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(host, device_recv, padded, cudaMemcpyDeviceToHost, stream));
  wait_own_stream(what);
  std::size_t offset = 0;
  for (int r = 0; r < size_; ++r) {
    const auto count = static_cast<std::size_t>(byte_counts[r]);
    if (count > 0) std::memcpy(recv + offset, host + static_cast<std::size_t>(r) * block, count);
    offset += count;
  }
}

// ---------------------------------------------------------------------------------------------
// Host-memory collectives
// ---------------------------------------------------------------------------------------------
void NcclComm::all_reduce_sum(std::span<float> data) {
  if (data.empty()) return;
  guarded("all_reduce_sum", [&] {
    SELFSPEC_CUDA_CHECK(cudaSetDevice(device_));
    const std::size_t n = data.size();
    std::vector<float>& parts = resources_->gathered;
    parts.resize(n * static_cast<std::size_t>(size_));
    const std::vector<std::int64_t> byte_counts(static_cast<std::size_t>(size_),
                                                static_cast<std::int64_t>(n * sizeof(float)));
    all_gather_blocks(reinterpret_cast<const std::byte*>(data.data()),
                      reinterpret_cast<std::byte*>(parts.data()), byte_counts,
                      "collective all_reduce_sum");
    // Rank order 0, 1, ..., n-1 on every rank: bit-identical everywhere and equal to MpiComm.
    for (std::size_t i = 0; i < n; ++i) {
      float sum = parts[i];
      for (int r = 1; r < size_; ++r) sum += parts[static_cast<std::size_t>(r) * n + i];
      data[i] = sum;
    }
  });
}

void NcclComm::broadcast(std::span<std::byte> data, int root) {
  check_root(root, "broadcast");
  if (data.empty()) return;
  guarded("broadcast", [&] {
    SELFSPEC_CUDA_CHECK(cudaSetDevice(device_));
    Resources& res = *resources_;
    const cudaStream_t stream = res.stream.get();
    const std::size_t bytes = data.size();
    std::byte* device = res.device_send.reserve(bytes);
    if (rank_ == root) {
      std::byte* host = res.host_send.reserve(bytes);
      std::memcpy(host, data.data(), bytes);
      SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
    }
    SELFSPEC_NCCL_SETTLE(
        ncclBroadcast(device, device, bytes, ncclUint8, root, res.comm.get(), stream),
        "collective broadcast");
    std::byte* host = nullptr;
    if (rank_ != root) {
      host = res.host_recv.reserve(bytes);
      SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
    }
    wait_own_stream("collective broadcast");
    if (host != nullptr) std::memcpy(data.data(), host, bytes);
  });
}

void NcclComm::gather(std::span<const float> send, std::span<float> recv,
                      std::span<const std::int64_t> counts, int root) {
  check_root(root, "gather");
  const std::vector<std::int64_t> byte_counts =
      float_byte_counts(counts, size_, rank_, send.size(), "gather");
  if (rank_ == root) {
    SELFSPEC_CHECK(recv.size() >= total_of(counts), "gather: receive buffer too small");
  }
  guarded("gather", [&] {
    SELFSPEC_CUDA_CHECK(cudaSetDevice(device_));
    gather_blocks(reinterpret_cast<const std::byte*>(send.data()),
                  reinterpret_cast<std::byte*>(recv.data()), byte_counts, root,
                  "collective gather");
  });
}

void NcclComm::all_gather(std::span<const float> send, std::span<float> recv,
                          std::span<const std::int64_t> counts) {
  const std::vector<std::int64_t> byte_counts =
      float_byte_counts(counts, size_, rank_, send.size(), "all_gather");
  SELFSPEC_CHECK(recv.size() >= total_of(counts), "all_gather: receive buffer too small");
  guarded("all_gather", [&] {
    SELFSPEC_CUDA_CHECK(cudaSetDevice(device_));
    all_gather_blocks(reinterpret_cast<const std::byte*>(send.data()),
                      reinterpret_cast<std::byte*>(recv.data()), byte_counts,
                      "collective all_gather");
  });
}

void NcclComm::gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv, int root) {
  check_root(root, "gather_bytes");
  if (rank_ == root) {
    SELFSPEC_CHECK(recv.size() >= send.size() * static_cast<std::size_t>(size_),
                   "gather_bytes: receive buffer too small");
  }
  if (send.empty()) return;
  const std::vector<std::int64_t> byte_counts(static_cast<std::size_t>(size_),
                                              static_cast<std::int64_t>(send.size()));
  guarded("gather_bytes", [&] {
    SELFSPEC_CUDA_CHECK(cudaSetDevice(device_));
    gather_blocks(send.data(), recv.data(), byte_counts, root, "collective gather_bytes");
  });
}

void NcclComm::all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) {
  SELFSPEC_CHECK(static_cast<int>(values.size()) == size_, "all_gather_u64: {} slots for {} ranks",
                 values.size(), size_);
  const std::vector<std::int64_t> byte_counts(static_cast<std::size_t>(size_),
                                              static_cast<std::int64_t>(sizeof(std::uint64_t)));
  guarded("all_gather_u64", [&] {
    SELFSPEC_CUDA_CHECK(cudaSetDevice(device_));
    all_gather_blocks(reinterpret_cast<const std::byte*>(&value),
                      reinterpret_cast<std::byte*>(values.data()), byte_counts,
                      "collective all_gather_u64");
  });
}

void NcclComm::barrier() {
  // NCCL has no barrier: a one-element all-reduce completes on a rank only once every rank has
  // joined it.
  guarded("barrier", [&] {
    SELFSPEC_CUDA_CHECK(cudaSetDevice(device_));
    Resources& res = *resources_;
    const cudaStream_t stream = res.stream.get();
    std::byte* device = res.device_send.reserve(sizeof(float));
    SELFSPEC_CUDA_CHECK(cudaMemsetAsync(device, 0, sizeof(float), stream));
    SELFSPEC_NCCL_SETTLE(
        ncclAllReduce(device, device, 1, ncclFloat32, ncclSum, res.comm.get(), stream),
        "collective barrier");
    wait_own_stream("collective barrier");
  });
}

// ---------------------------------------------------------------------------------------------
// Device-memory collectives and the public wait
// ---------------------------------------------------------------------------------------------
void NcclComm::all_reduce_sum_device(float* data, std::size_t count, void* stream) {
  all_reduce_device(data, count, DType::kF32, stream);
}

void NcclComm::all_reduce_device(void* data, std::size_t count, DType dtype, void* stream) {
  if (count == 0) return;
  SELFSPEC_CHECK(data != nullptr, "all_reduce_sum_device: null buffer of {} elements", count);
  const ncclDataType_t type = nccl_type(dtype);
  // NCCL's sum is deterministic for a given configuration (ranks, algorithm, protocol, channels):
  // each element is reduced once and the result is distributed (ring, tree and NVLS alike), so
  // in practice every rank receives the same bits; NCCL does not document this as a guarantee,
  // nor the association order (it is not rank order). nccl_comm_test checks it on the machine.
  guarded("all_reduce_sum_device", [&] {
    SELFSPEC_NCCL_SETTLE(ncclAllReduce(data, data, count, type, ncclSum, resources_->comm.get(),
                                       static_cast<cudaStream_t>(stream)),
                         "collective all_reduce_sum_device");
  });
}

void NcclComm::all_gather_bytes_device(const void* send, void* recv, std::size_t bytes,
                                       void* stream) {
  if (bytes == 0) return;
  SELFSPEC_CHECK(send != nullptr && recv != nullptr,
                 "all_gather_bytes_device: null buffer for {} bytes per rank", bytes);
  guarded("all_gather_bytes_device", [&] {
    SELFSPEC_NCCL_SETTLE(ncclAllGather(send, recv, bytes, ncclUint8, resources_->comm.get(),
                                       static_cast<cudaStream_t>(stream)),
                         "collective all_gather_bytes_device");
  });
}

void NcclComm::wait(void* stream) {
  guarded("wait", [&] { wait_stream(stream, "collective(s) on the waited stream"); });
}

}  // namespace selfspec
