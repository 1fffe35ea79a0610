// A view of one forward's logit rows: [rows × width] floats at `data`, in host memory or
// (device = true) in the memory of a device backend. LlamaModel::forward returns it; the shard
// reductions (backend/shard_reductions.hpp) and the verifiers read it.
#pragma once

#include "core/error.hpp"

#include <cstdint>
#include <span>

namespace selfspec {

struct LogitRows {
  const float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t width = 0;
  bool device = false;

  // Host rows of `width` floats each (throws unless `values` holds whole rows).
  static LogitRows host(std::span<const float> values, std::int64_t width) {
    SELFSPEC_CHECK(width > 0 && static_cast<std::int64_t>(values.size()) % width == 0,
                   "logit rows: {} values are not whole rows of {}", values.size(), width);
    return {values.data(), static_cast<std::int64_t>(values.size()) / width, width, false};
  }
  // The rows as host floats (only for host rows).
  std::span<const float> host_values() const {
    SELFSPEC_CHECK(!device, "logit rows in device memory read as host memory");
    return {data, static_cast<std::size_t>(rows * width)};
  }
};

}  // namespace selfspec
