// ShardReductions over rows in CUDA device memory (device-side verification on the CUDA
// backend): the logits of a verification stay where the LM head wrote them. The statistics are
// kernels/cuda row_stats (one block per row), exchanged between ranks by one NCCL all-gather on
// the backend's stream when the communicator takes device buffers; the walks are
// kernels/cuda/shard_walk.cu. Only records of a few scalars are copied to the host, each copy
// waiting for the stream under the backend's deadline (Backend::download). Scratch memory is this
// file's own cudaMalloc rather than Backend::allocate, which drops the backend's recorded graphs
// (a new buffer may take a freed one's address): no graph refers to these buffers, so a new
// decoding run keeps the graphs of the last. It is sized for a verification's rows up front and
// grows geometrically; retained draft rows keep their buffers across rounds.
#include "backend/backend.hpp"
#include "backend/shard_reductions.hpp"
#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "kernels/cuda/cuda_kernels.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstddef>

namespace selfspec {
namespace {

namespace kcu = kernels::cuda;

static_assert(sizeof(ShardStats) == sizeof(kcu::RowStatsRecord));
static_assert(offsetof(ShardStats, max) == offsetof(kcu::RowStatsRecord, max));
static_assert(offsetof(ShardStats, sum_exp) == offsetof(kcu::RowStatsRecord, sum_exp));
static_assert(offsetof(ShardStats, argmax) == offsetof(kcu::RowStatsRecord, argmax));

constexpr std::size_t kInitialRecords = 256;  // rows × ranks of one verification, generously

// Zeroed device memory on the current device (the backend's: same thread), freed by cudaFree.
// The zeroing runs on the backend's stream, so the work that later uses the buffer on that
// (non-blocking) stream is ordered after it; a plain cudaMemset would run on the legacy stream,
// which a non-blocking stream does not wait for.
DeviceBuffer device_allocation(std::size_t bytes, cudaStream_t stream) {
  void* data = nullptr;
  SELFSPEC_CUDA_CHECK(cudaMalloc(&data, bytes));
  DeviceBuffer buffer(data, bytes, [](void* pointer) { (void)cudaFree(pointer); });
  SELFSPEC_CUDA_CHECK(cudaMemsetAsync(data, 0, bytes, stream));
  return buffer;
}

class CudaShardReductions final : public ShardReductions {
 public:
  CudaShardReductions(Backend& backend, VocabShard shard)
      : ShardReductions(std::move(shard)), backend_(backend) {
    SELFSPEC_CHECK(!backend.host_memory() && backend.native_stream() != nullptr,
                   "CUDA shard reductions need a CUDA backend");
    scratch_ = device_allocation(sizeof(Scratch), stream_t());
    for (auto& records : records_) grow(records, kInitialRecords);
  }

  std::string_view name() const override { return "cuda"; }
  bool device_resident() const override { return true; }

  std::vector<float> logits_at(std::span<const std::int32_t> ids) override {
    SELFSPEC_CHECK(static_cast<std::int64_t>(ids.size()) <= rows(), "logits_at: {} ids for {} rows",
                   ids.size(), rows());
    std::vector<float> values(ids.size());
    for (std::size_t first = 0; first < ids.size(); first += kcu::kMaxQueriedIds) {
      const std::size_t n =
          std::min(ids.size() - first, static_cast<std::size_t>(kcu::kMaxQueriedIds));
      kcu::logits_at(rows_data() + static_cast<std::int64_t>(first) * vocab_local(), vocab_local(),
                     vocab_begin(), ids.subspan(first, n), logit_values(), stream_t());
      backend_.download(values.data() + first, logit_values(), n * sizeof(float));
    }
    return values;
  }

  int retain(std::int64_t r) override {
    check_row(r);
    const std::size_t bytes = static_cast<std::size_t>(vocab_local()) * sizeof(float);
    if (retained_count_ == retained_.size())
      retained_.push_back(device_allocation(bytes, stream_t()));
    DeviceBuffer& slot = retained_[retained_count_];
    SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(slot.data(), rows_data() + r * vocab_local(), bytes,
                                        cudaMemcpyDeviceToDevice, stream_t()));
    return static_cast<int>(retained_count_++);
  }
  void clear_retained() override { retained_count_ = 0; }

  DrawnToken walk_softmax(std::int64_t r, double inv_temperature, double target) override {
    check_row(r);
    const float* row = rows_data() + r * vocab_local();
    kcu::row_stats(row, 1, vocab_local(), vocab_begin(), inv_temperature, stats_record(),
                   stream_t());
    kcu::walk_softmax(row, vocab_local(), vocab_begin(), inv_temperature, stats_record(), target,
                      draw_record(), stream_t());
    kcu::DrawRecord record;
    backend_.download(&record, draw_record(), sizeof(record));
    return {record.id, record.logit};
  }

  double residual_mass(std::int64_t r, int slot, const DensePair& pair) override {
    check_row(r);
    kcu::residual_mass(rows_data() + r * vocab_local(), retained(slot), vocab_local(),
                       residual_pair(pair), mass_value(), stream_t());
    double mass = 0.0;
    backend_.download(&mass, mass_value(), sizeof(mass));
    return mass;
  }

  std::int32_t walk_residual(std::int64_t r, int slot, const DensePair& pair,
                             double target) override {
    check_row(r);
    kcu::walk_residual(rows_data() + r * vocab_local(), retained(slot), vocab_local(),
                       vocab_begin(), residual_pair(pair), target, draw_record(), stream_t());
    kcu::DrawRecord record;
    backend_.download(&record, draw_record(), sizeof(record));
    return record.id;
  }

  std::span<const float> host_rows() override {
    if (!host_copy_valid_) {
      host_copy_.resize(static_cast<std::size_t>(rows() * vocab_local()));
      backend_.download(host_copy_.data(), rows_data(), host_copy_.size() * sizeof(float));
      host_copy_valid_ = true;
    }
    return host_copy_;
  }

 protected:
  // The device computes the whole statistics either way (the exponentials are cheap there).
  void compute_stats(double inv_temperature, RowNeeds /*needs*/, ShardStats* out) override {
    kcu::row_stats(rows_data(), rows(), vocab_local(), vocab_begin(), inv_temperature,
                   reinterpret_cast<kcu::RowStatsRecord*>(out), stream_t());
  }
  ShardStats* record_buffer(int which, std::size_t count) override {
    DeviceBuffer& records = records_[static_cast<std::size_t>(which)];
    if (records.bytes() < count * sizeof(ShardStats)) grow(records, count);
    return records.as<ShardStats>();
  }
  void fetch(ShardStats* host, const ShardStats* records, std::size_t count) override {
    backend_.download(host, records, count * sizeof(ShardStats));
  }
  void pack_rows(float* out, std::int64_t pitch) override {
    const std::size_t width = static_cast<std::size_t>(vocab_local()) * sizeof(float);
    SELFSPEC_CUDA_CHECK(cudaMemcpy2DAsync(
        out, static_cast<std::size_t>(pitch) * sizeof(float), rows_data(), width, width,
        static_cast<std::size_t>(rows()), cudaMemcpyDeviceToDevice, stream_t()));
  }
  float* float_buffer(int which, std::size_t count) override {
    DeviceBuffer& buffer = floats_[static_cast<std::size_t>(which)];
    if (buffer.bytes() < count * sizeof(float)) {
      buffer = device_allocation(
          std::max(count, 2 * buffer.bytes() / sizeof(float)) * sizeof(float), stream_t());
    }
    return buffer.as<float>();
  }
  void fetch_floats(float* host, const float* values, std::size_t count) override {
    backend_.download(host, values, count * sizeof(float));
  }
  bool exchanges_on_device(const Communicator& comm) const override {
    return comm.supports_device_buffers();
  }
  void* stream() const override { return backend_.native_stream(); }
  void rows_changed() override { host_copy_valid_ = false; }

 private:
  // Device scratch for one call's results.
  struct Scratch {
    kcu::RowStatsRecord stats;
    kcu::DrawRecord draw;
    double mass;
    float logits[kcu::kMaxQueriedIds];
  };

  // Fields of the device scratch (device addresses: never dereferenced on the host).
  template <typename T>
  T* field(std::size_t offset) {
    return reinterpret_cast<T*>(scratch_.as<std::byte>() + offset);
  }
  kcu::RowStatsRecord* stats_record() {
    return field<kcu::RowStatsRecord>(offsetof(Scratch, stats));
  }
  kcu::DrawRecord* draw_record() { return field<kcu::DrawRecord>(offsetof(Scratch, draw)); }
  double* mass_value() { return field<double>(offsetof(Scratch, mass)); }
  float* logit_values() { return field<float>(offsetof(Scratch, logits)); }
  cudaStream_t stream_t() const { return static_cast<cudaStream_t>(backend_.native_stream()); }
  void grow(DeviceBuffer& records, std::size_t count) {
    const std::size_t have = records.bytes() / sizeof(ShardStats);
    records = device_allocation(std::max(count, 2 * have) * sizeof(ShardStats), stream_t());
  }
  void check_row(std::int64_t r) const {
    SELFSPEC_CHECK(r >= 0 && r < rows(), "logit row {} of {}", r, rows());
  }
  const float* retained(int slot) const {
    SELFSPEC_CHECK(slot >= 0 && static_cast<std::size_t>(slot) < retained_count_,
                   "retained draft row {} of {}", slot, retained_count_);
    return retained_[static_cast<std::size_t>(slot)].as<const float>();
  }
  static kcu::ResidualPair residual_pair(const DensePair& pair) {
    return {pair.p_max, pair.p_sum, pair.q_max, pair.q_sum, pair.inv_temperature};
  }

  Backend& backend_;
  DeviceBuffer scratch_;
  std::array<DeviceBuffer, 2> records_;
  std::array<DeviceBuffer, 2> floats_;  // gather_rows' padded blocks
  std::vector<DeviceBuffer> retained_;
  std::size_t retained_count_ = 0;
  std::vector<float> host_copy_;
  bool host_copy_valid_ = false;
};

}  // namespace

std::unique_ptr<ShardReductions> make_cuda_shard_reductions(Backend& backend, VocabShard shard) {
  return std::make_unique<CudaShardReductions>(backend, std::move(shard));
}

}  // namespace selfspec
