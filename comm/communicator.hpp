// The communicator interface: the collectives tensor parallelism needs, on host buffers for the
// CPU backend (device buffers arrive with NcclComm). One implementation per file: LocalComm
// (a single rank), MpiComm (MPI processes; only in a build with MPI), NcclComm (GPUs).
//
// Contract: every collective is called by all ranks in the same order with matching sizes.
// all_reduce_sum is deterministic and leaves bit-identical results on every rank (it sums the
// ranks' contributions in rank order 0, 1, ..., n-1), so the replicated residual stream stays
// bit-identical across ranks and runs regardless of which algorithm the MPI library picks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace selfspec {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view name() const = 0;
  bool is_root() const { return rank() == 0; }

  // data[i] = sum over ranks r = 0..n-1 (in that order) of data_r[i], on every rank.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  // Copies root's bytes to every rank.
  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  // Concatenates every rank's `send` (rank order) into `recv` on root only; counts[r] is rank r's
  // element count (known to all ranks); recv must hold sum(counts) on root and is unused elsewhere.
  virtual void gather(std::span<const float> send, std::span<float> recv,
                      std::span<const std::int64_t> counts, int root) = 0;
  // Like gather, but every rank receives the concatenation.
  virtual void all_gather(std::span<const float> send, std::span<float> recv,
                          std::span<const std::int64_t> counts) = 0;
  // Concatenates every rank's `send` block (all blocks the same size) into `recv` on root, in rank
  // order: small records of per-rank statistics. recv must hold size() blocks on root.
  virtual void gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv,
                            int root) = 0;
  // values[r] = rank r's `value`, on every rank (small control data: checksums, flags).
  virtual void all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) = 0;
  virtual void barrier() = 0;
  // A barrier with its own deadline for a wait that may legitimately be long (ranks finishing
  // loading their shards at different times): communicators with a watchdog (MpiComm) end the job
  // after timeout_s seconds instead of their usual deadline. `what` names the wait in the error.
  virtual void wait_for_peers(const char* what, double timeout_s);

  // Device-buffer collectives (NcclComm): in-place sum of `count` floats in device memory,
  // enqueued on `stream` (a cudaStream_t) without waiting, so a CUDA graph can capture it. Same
  // result on every rank. Communicators over host memory return false and do not implement it.
  virtual bool supports_device_buffers() const { return false; }
  virtual void all_reduce_sum_device(float* data, std::size_t count, void* stream);
  // recv[r · bytes, (r + 1) · bytes) = rank r's `bytes` bytes at `send`, on every rank: device
  // memory, enqueued on `stream` without waiting (small records of per-rank statistics for
  // device-side verification). Same support as all_reduce_sum_device.
  virtual void all_gather_bytes_device(const void* send, void* recv, std::size_t bytes,
                                       void* stream);
  // Whether the device-buffer collectives only enqueue work (NCCL), so a CUDA graph may record
  // them. A communicator that stages device buffers through host memory (several ranks sharing
  // one GPU in tests) waits on the stream inside them, which no graph can record.
  virtual bool device_collectives_recordable() const { return supports_device_buffers(); }

  // Gathers one trivially copyable record per rank on root (records[r] = rank r's; root only).
  template <typename T>
  void gather_records(std::span<const T> mine, std::span<T> all, int root) {
    gather_bytes(std::as_bytes(mine), std::as_writable_bytes(all), root);
  }

  // Broadcast of a trivially copyable object (control messages).
  template <typename T>
  void broadcast_object(T& object, int root) {
    broadcast(std::as_writable_bytes(std::span<T>(&object, 1)), root);
  }
};

// MpiComm over MPI_COMM_WORLD when an MpiRuntime is active, LocalComm otherwise (always in a
// build without MPI).
std::unique_ptr<Communicator> make_world_communicator();

}  // namespace selfspec
