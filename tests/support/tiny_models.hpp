// The tiny models several tests share, and the write-then-load steps around them. A test whose
// model differs in a field takes the closest spec here and sets that field itself, so that what
// it varies stays visible in the test.
#pragma once

#include "comm/communicator.hpp"
#include "model/llama_model.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace selfspec::testing {

// Grouped-query attention at hidden 64: 8 query heads over 2 KV heads (head_dim 8) in `layers`
// layers; every other field is TinyModelSpec's default (intermediate 48, vocab 64, f32, seed 1,
// scale 1.0).
TinyModelSpec gqa_tiny_spec(std::int64_t layers);

// The single-rank decoding model (speculative, SWIFT, ASD, skip search): gqa_tiny_spec(layers)
// with intermediate 96, vocab 61 and scale 2.0 (peakier next-token distributions).
TinyModelSpec speculative_tiny_spec(std::int64_t layers);

// The multi-rank decoding model: gqa_tiny_spec(layers) with intermediate 102 and vocab 97 (neither
// splits evenly over 4 ranks) and scale 1.5.
TinyModelSpec tensor_parallel_tiny_spec(std::int64_t layers);

// Writes spec's checkpoint into dir and loads it for comm's rank on the CPU backend.
std::unique_ptr<LlamaModel> write_and_load_model(const TinyModelSpec& spec,
                                                 const std::filesystem::path& dir,
                                                 Communicator& comm);

// Multi-rank tests: rank 0 writes spec's checkpoint into a new TempDir named after `prefix`, kept
// in `dir` (left empty on the other ranks), and every rank gets the checkpoint's path.
std::filesystem::path write_tiny_checkpoint_on_root(const TinyModelSpec& spec, Communicator& comm,
                                                    std::unique_ptr<TempDir>& dir,
                                                    const std::string& prefix);

}  // namespace selfspec::testing
