// Scattering a compact block of columns into wide rows: how the logits of a pruned draft
// vocabulary (src/model/draft_vocabulary.hpp) become ordinary vocab-shard rows.
#pragma once

#include <cstdint>

namespace selfspec::kernels::cpu {

// For every row r < rows: out[r][i] = fill for all i < width, then out[r][ids[j]] = values[r][j]
// for j < n_ids. values is [rows × n_ids], out is [rows × width]; ids are distinct and lie in
// [0, width). A plain copy, no arithmetic: the result does not depend on threads or order.
void scatter_columns(const float* values, std::int64_t rows, const std::int32_t* ids,
                     std::int64_t n_ids, std::int64_t width, float fill, float* out);

}  // namespace selfspec::kernels::cpu
