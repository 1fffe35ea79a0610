// ShardReductions over rows in host memory (the CPU backend): backend/logit_statistics.hpp's
// functions on the rank's shard, the statistics exchanged through the communicator's host
// collectives — or, for tests of the device exchange, through its device collectives on host
// memory (HostExchange::kDeviceCollectives).
#include "backend/shard_reductions.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <array>
#include <limits>

namespace selfspec {
namespace {

class HostShardReductions final : public ShardReductions {
 public:
  HostShardReductions(VocabShard shard, HostExchange exchange)
      : ShardReductions(std::move(shard)), exchange_(exchange) {}

  std::string_view name() const override { return "host"; }
  bool device_resident() const override { return false; }

  std::vector<float> logits_at(std::span<const std::int32_t> ids) override {
    SELFSPEC_CHECK(static_cast<std::int64_t>(ids.size()) <= rows(), "logits_at: {} ids for {} rows",
                   ids.size(), rows());
    std::vector<float> values(ids.size(), std::numeric_limits<float>::quiet_NaN());
    for (std::size_t r = 0; r < ids.size(); ++r) {
      if (shard().contains(ids[r])) {
        values[r] =
            row(static_cast<std::int64_t>(r))[static_cast<std::size_t>(ids[r] - vocab_begin())];
      }
    }
    return values;
  }

  int retain(std::int64_t r) override {
    const auto values = row(r);
    retained_.emplace_back(values.begin(), values.end());
    return static_cast<int>(retained_.size()) - 1;
  }
  void clear_retained() override { retained_.clear(); }

  DrawnToken walk_softmax(std::int64_t r, double inv_temperature, double target) override {
    const ShardStats mine = shard_stats(row(r), vocab_begin(), inv_temperature);
    DrawnToken drawn;
    if (mine.argmax < 0) return drawn;
    drawn.id = selfspec::walk_softmax(row(r), vocab_begin(), inv_temperature, mine.max, target);
    drawn.logit = row(r)[static_cast<std::size_t>(drawn.id - vocab_begin())];
    return drawn;
  }

  double residual_mass(std::int64_t r, int slot, const DensePair& pair) override {
    return selfspec::residual_mass(row(r), retained(slot), pair);
  }

  std::int32_t walk_residual(std::int64_t r, int slot, const DensePair& pair,
                             double target) override {
    return selfspec::walk_residual(row(r), retained(slot), vocab_begin(), pair, target);
  }

  std::span<const float> host_rows() override {
    return {rows_data(), static_cast<std::size_t>(rows() * vocab_local())};
  }

 protected:
  void compute_stats(double inv_temperature, RowNeeds needs, ShardStats* out) override {
    for (std::int64_t r = 0; r < rows(); ++r) {
      out[r] = shard_stats(row(r), vocab_begin(), inv_temperature, needs);
    }
  }
  ShardStats* record_buffer(int which, std::size_t count) override {
    return at_least(records_[static_cast<std::size_t>(which)], count);
  }
  void fetch(ShardStats* host, const ShardStats* records, std::size_t count) override {
    std::copy(records, records + count, host);
  }
  void pack_rows(float* out, std::int64_t pitch) override {
    for (std::int64_t r = 0; r < rows(); ++r) std::ranges::copy(row(r), out + r * pitch);
  }
  float* float_buffer(int which, std::size_t count) override {
    return at_least(floats_[static_cast<std::size_t>(which)], count);
  }
  void fetch_floats(float* host, const float* values, std::size_t count) override {
    std::copy(values, values + count, host);
  }
  bool exchanges_on_device(const Communicator& comm) const override {
    return exchange_ == HostExchange::kDeviceCollectives && comm.supports_device_buffers();
  }

 private:
  template <typename T>
  static T* at_least(std::vector<T>& buffer, std::size_t count) {
    if (buffer.size() < count) buffer.resize(count);
    return buffer.data();
  }
  std::span<const float> row(std::int64_t r) const {
    SELFSPEC_CHECK(r >= 0 && r < rows(), "logit row {} of {}", r, rows());
    return {rows_data() + r * vocab_local(), static_cast<std::size_t>(vocab_local())};
  }
  std::span<const float> retained(int slot) const {
    SELFSPEC_CHECK(slot >= 0 && slot < static_cast<int>(retained_.size()),
                   "retained draft row {} of {}", slot, retained_.size());
    return retained_[static_cast<std::size_t>(slot)];
  }

  HostExchange exchange_;
  std::vector<std::vector<float>> retained_;
  std::array<std::vector<ShardStats>, 2> records_;
  std::array<std::vector<float>, 2> floats_;
};

}  // namespace

std::unique_ptr<ShardReductions> make_host_shard_reductions(VocabShard shard,
                                                            HostExchange exchange) {
  return std::make_unique<HostShardReductions>(std::move(shard), exchange);
}

}  // namespace selfspec
