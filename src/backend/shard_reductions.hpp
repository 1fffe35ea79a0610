// This rank's vocabulary-shard logit rows of the latest forward, and the per-row reductions the
// local-reduction verifier (LocalReductionLogits) computes on them, wherever the rows live. Only
// the results — host scalars and token ids — leave an implementation, so on a GPU the rows stay
// in device memory (device-side verification). One implementation per file:
//   HostShardReductions  rows in host memory; backend/logit_statistics.hpp's functions;
//   CudaShardReductions  rows in CUDA device memory; kernels/cuda (CUDA builds only).
//
// The exchanges (gather_stats, and gather_rows for the gathering verifier) are the collectives
// here: every rank's per-row shard
// statistics reach rank 0 either through the communicator's host collectives, or — when the
// implementation exchanges on the device and the communicator takes device buffers (NcclComm) —
// by one device all-gather enqueued on the backend's stream after the statistics kernel, so that
// only the gathered records are copied to the host.
#pragma once

#include "backend/logit_rows.hpp"
#include "backend/logit_statistics.hpp"
#include "backend/vocab_shard.hpp"
#include "comm/communicator.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace selfspec {

class Backend;

// A token drawn from a row, with its (unscaled) logit in that row.
struct DrawnToken {
  std::int32_t id = -1;
  float logit = 0.0f;
};

class ShardReductions {
 public:
  explicit ShardReductions(VocabShard shard) : shard_(std::move(shard)) {}
  virtual ~ShardReductions() = default;
  ShardReductions(const ShardReductions&) = delete;
  ShardReductions& operator=(const ShardReductions&) = delete;

  virtual std::string_view name() const = 0;  // "host", "cuda"
  // Whether set_rows takes device memory.
  virtual bool device_resident() const = 0;

  // The current rows: [n_rows × vocab_local] in this implementation's memory, borrowed until the
  // next set_rows.
  void set_rows(const LogitRows& rows);
  std::int64_t rows() const { return n_rows_; }
  std::int64_t vocab_local() const { return shard_.size; }
  std::int64_t vocab_begin() const { return shard_.begin; }

  // Collective: every rank's shard statistics of every current row at 1/T, on rank 0 in rank-major
  // order (all[s · rows() + r] = rank s, row r); empty on the other ranks. With RowNeeds::kArgmax
  // an implementation may leave sum_exp 0 (the host does: no exponentials).
  std::vector<ShardStats> gather_stats(Communicator& comm, double inv_temperature,
                                       RowNeeds needs = RowNeeds::kSoftmax);

  // Collective: every rank's current rows on rank 0, rank-major ([rank][row][that rank's vocab
  // shard], shard sizes from the plan's vocab_counts); empty on the other ranks. With the exchange
  // on the device (exchanges_on_device) the rows travel by one device all-gather on stream(),
  // every rank's block padded to the largest shard, and only rank 0 copies them to the host;
  // otherwise through the communicator's host gather.
  std::vector<float> gather_rows(Communicator& comm);

  // Local (no collective) from here on.
  // The logit of ids[r] in current row r when this shard holds it, NaN otherwise.
  virtual std::vector<float> logits_at(std::span<const std::int32_t> ids) = 0;
  // Keeps current row `row` (a draft distribution q); returns its slot.
  virtual int retain(std::int64_t row) = 0;
  virtual void clear_retained() = 0;
  // A draw from current row `row`'s shard softmax at 1/T (walk_softmax relative to the shard's
  // own max): id -1 when the shard has no mass.
  virtual DrawnToken walk_softmax(std::int64_t row, double inv_temperature, double target) = 0;
  // The shard's residual mass Σ max(0, p − q), p = current row `row`, q = retained `slot`.
  virtual double residual_mass(std::int64_t row, int slot, const DensePair& pair) = 0;
  // The residual walk over the shard (walk_residual); only for a shard with residual mass (the
  // caller picked it by its mass): the host throws otherwise, the device answers -1.
  virtual std::int32_t walk_residual(std::int64_t row, int slot, const DensePair& pair,
                                     double target) = 0;
  // The current rows in host memory ([rows() × vocab_local()]), copied from the device when they
  // live there: for the computations without a device half (top-k candidates, top-p's global
  // sort). Valid until the next set_rows.
  virtual std::span<const float> host_rows() = 0;

 protected:
  // This rank's statistics of every current row into `out` (rows() records, this
  // implementation's memory); `needs` as in gather_stats.
  virtual void compute_stats(double inv_temperature, RowNeeds needs, ShardStats* out) = 0;
  // Record storage in this implementation's memory: buffer `which` (0: this rank's, 1: everyone's)
  // of at least `count` records.
  virtual ShardStats* record_buffer(int which, std::size_t count) = 0;
  // Copies `count` records from this implementation's memory to the host (waits for them).
  virtual void fetch(ShardStats* host, const ShardStats* records, std::size_t count) = 0;
  // The current rows copied into `out` (this implementation's memory, rows() × pitch floats,
  // pitch >= vocab_local(); the padding is left as it is).
  virtual void pack_rows(float* out, std::int64_t pitch) = 0;
  // Float storage in this implementation's memory: buffer `which` (0, 1) of >= `count` floats.
  virtual float* float_buffer(int which, std::size_t count) = 0;
  // Copies `count` floats from this implementation's memory to the host (waits for them).
  virtual void fetch_floats(float* host, const float* values, std::size_t count) = 0;
  // True when gather_stats should all-gather the records in this implementation's memory with
  // comm.all_gather_bytes_device on stream(), rather than gather host copies.
  virtual bool exchanges_on_device(const Communicator& comm) const = 0;
  virtual void* stream() const { return nullptr; }
  // Called by set_rows after the rows changed.
  virtual void rows_changed() {}

  const float* rows_data() const { return rows_; }
  const VocabShard& shard() const { return shard_; }

 private:
  VocabShard shard_;
  const float* rows_ = nullptr;
  std::int64_t n_rows_ = 0;
};

// How HostShardReductions exchanges its statistics: through the communicator's host collectives
// (the CPU backend), or through its device collectives on host memory (tests: a fake communicator
// standing in for NCCL exercises the device exchange).
enum class HostExchange { kHostCollectives, kDeviceCollectives };
std::unique_ptr<ShardReductions> make_host_shard_reductions(
    VocabShard shard, HostExchange exchange = HostExchange::kHostCollectives);
// CudaShardReductions on `backend` (a CUDA backend; CUDA builds only). Backends hand out their
// reductions through Backend::make_shard_reductions.
std::unique_ptr<ShardReductions> make_cuda_shard_reductions(Backend& backend, VocabShard shard);

}  // namespace selfspec
