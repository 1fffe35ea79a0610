// scatter_columns: fill, then scatter (kernels/cpu/scatter.hpp). Single-threaded: a draft row is a
// few hundred kilobytes, far below what is worth splitting over threads.
#include "kernels/cpu/scatter.hpp"

#include <algorithm>

namespace selfspec::kernels::cpu {

void scatter_columns(const float* values, std::int64_t rows, const std::int32_t* ids,
                     std::int64_t n_ids, std::int64_t width, float fill, float* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = out + r * width;
    const float* compact = values + r * n_ids;
    std::fill(row, row + width, fill);
    for (std::int64_t j = 0; j < n_ids; ++j) row[ids[j]] = compact[j];
  }
}

}  // namespace selfspec::kernels::cpu
