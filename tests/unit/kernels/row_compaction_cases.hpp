// The test cases of compact_rows, shared by the CPU kernel test and the CUDA kernel test: shapes
// (row widths 1, 64, 128, 256; 0, 1, 5 and 64 rows; a LLaMA-70B-like cache of 160 blocks) times
// row patterns (random ascending rows, every other row, the identity, rows past every
// destination), blocks with a gap between them, and a reference that copies element by element
// in the specified order. Nothing here calls kernel code.
#pragma once

#include "kernel_test_util.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace selfspec::kernels::cpu::test {

struct CompactionCase {
  std::string name;
  std::int64_t blocks = 0;
  std::int64_t rows_per_block = 0;
  std::int64_t row_floats = 0;
  std::int64_t block_stride = 0;  // rows_per_block * row_floats + a gap that must stay untouched
  std::int64_t to = 0;
  std::vector<std::int32_t> from;

  std::size_t buffer_floats() const { return static_cast<std::size_t>(blocks * block_stride); }
};

enum class RowPattern { kRandom, kEveryOther, kIdentity, kPastDestinations };

inline const char* row_pattern_name(RowPattern pattern) {
  switch (pattern) {
    case RowPattern::kRandom:
      return "random";
    case RowPattern::kEveryOther:
      return "every-other";
    case RowPattern::kIdentity:
      return "identity";
    case RowPattern::kPastDestinations:
      return "past-destinations";
  }
  return "?";
}

// n rows for destination `to` in a block of rows_per_block rows, following `pattern`.
inline std::vector<std::int32_t> pattern_rows(std::mt19937& rng, RowPattern pattern,
                                              std::int64_t rows_per_block, std::int64_t to,
                                              std::int64_t n) {
  std::vector<std::int32_t> rows;
  for (std::int64_t i = 0; i < n; ++i) {
    switch (pattern) {
      case RowPattern::kEveryOther:
        rows.push_back(static_cast<std::int32_t>(to + 1 + 2 * i));
        break;
      case RowPattern::kIdentity:
        rows.push_back(static_cast<std::int32_t>(to + i));
        break;
      case RowPattern::kPastDestinations:
        rows.push_back(static_cast<std::int32_t>(rows_per_block - n + i));
        break;
      case RowPattern::kRandom:
        break;
    }
  }
  if (pattern == RowPattern::kRandom) {
    // n distinct rows of [to, rows_per_block), ascending: the i-th is at least to + i.
    std::vector<std::int32_t> all(static_cast<std::size_t>(rows_per_block - to));
    std::iota(all.begin(), all.end(), static_cast<std::int32_t>(to));
    std::shuffle(all.begin(), all.end(), rng);
    rows.assign(all.begin(), all.begin() + n);
    std::sort(rows.begin(), rows.end());
  }
  return rows;
}

inline std::vector<CompactionCase> compaction_cases(std::mt19937& rng) {
  std::vector<CompactionCase> cases;
  const auto add = [&](std::int64_t blocks, std::int64_t row_floats, std::int64_t n,
                       RowPattern pattern) {
    CompactionCase c;
    c.blocks = blocks;
    c.row_floats = row_floats;
    c.to = std::uniform_int_distribution<std::int64_t>(0, 6)(rng);
    c.rows_per_block = c.to + 2 * n + 1 + std::uniform_int_distribution<std::int64_t>(0, 9)(rng);
    c.block_stride = c.rows_per_block * c.row_floats + 4;
    c.from = pattern_rows(rng, pattern, c.rows_per_block, c.to, n);
    c.name = std::to_string(blocks) + " blocks x " + std::to_string(c.rows_per_block) +
             " rows of " + std::to_string(row_floats) + ", " + std::to_string(n) + " " +
             row_pattern_name(pattern) + " rows to " + std::to_string(c.to);
    cases.push_back(std::move(c));
  };
  const RowPattern patterns[] = {RowPattern::kRandom, RowPattern::kEveryOther,
                                 RowPattern::kIdentity, RowPattern::kPastDestinations};
  for (const std::int64_t row_floats : {1, 64, 128, 256}) {
    for (const std::int64_t n : {0, 1, 5, 64}) {
      for (const RowPattern pattern : patterns) add(3, row_floats, n, pattern);
    }
  }
  add(160, 128, 8, RowPattern::kRandom);  // 80 layers x K/V x 1 KV head (LLaMA-70B at TP 8)
  add(180, 64, 8, RowPattern::kRandom);   // 30 layers x K/V x 3 KV heads (SmolLM2-135M)
  return cases;
}

// Random values, a different one in every float, so a misplaced row cannot go unnoticed.
inline std::vector<float> compaction_buffer(std::mt19937& rng, const CompactionCase& c) {
  return random_floats(rng, c.buffer_floats(), 100.0f);
}

// The specification, element by element: in every block, row to + i = row from[i] for
// i = 0, 1, ... in that order, on a copy of the buffer.
inline std::vector<float> reference_compaction(std::vector<float> buffer, const CompactionCase& c) {
  for (std::int64_t b = 0; b < c.blocks; ++b) {
    float* block = buffer.data() + b * c.block_stride;
    for (std::size_t i = 0; i < c.from.size(); ++i) {
      const std::int64_t destination = c.to + static_cast<std::int64_t>(i);
      for (std::int64_t k = 0; k < c.row_floats; ++k) {
        block[destination * c.row_floats + k] = block[c.from[i] * c.row_floats + k];
      }
    }
  }
  return buffer;
}

}  // namespace selfspec::kernels::cpu::test
