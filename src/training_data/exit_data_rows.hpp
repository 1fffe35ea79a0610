// The rows of an early-exit training-data shard (format: issue 11's "selfspec-exit-data", one row
// per position of a sequence) as rank 0 accumulates them, and their .safetensors file:
//   hidden BF16 [P, H], sequence / position / token / next_token F32 [P],
//   topk_ids / topk_logprobs F32 [P, k].
// Integer columns are F32 because the project's safetensors reader and writer handle floating
// dtypes only; every value is an integer below 2^24, so it is stored exactly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace selfspec {

struct ExitDataRows {
  std::int64_t hidden_size = 0;
  std::int32_t top_k = 0;
  std::vector<std::uint16_t> hidden;  // BF16 bits, [P × hidden_size]
  std::vector<float> sequence, position, token, next_token;
  std::vector<float> topk_ids, topk_logprobs;  // [P × top_k]

  std::int64_t positions() const { return static_cast<std::int64_t>(sequence.size()); }
  // Appends `other`'s rows (same hidden_size and top_k).
  void append(const ExitDataRows& other);
  void clear();
};

// Writes the rows as one .safetensors file (atomically: safetensors_file_output.hpp).
void write_exit_data_shard(const ExitDataRows& rows, const std::filesystem::path& path);

}  // namespace selfspec
