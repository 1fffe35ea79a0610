// Which slice of the model a tensor-parallel rank owns (Megatron layout; docs/ARCHITECTURE.md,
// "The forward pass"):
//   attention: query heads split evenly; KV heads split evenly when n_kv % tp == 0, otherwise
//              replicated so each rank holds the KV head its query heads use (tp % n_kv == 0);
//              o_proj row-parallel (its input columns follow the rank's query heads);
//   MLP:       gate/up column-parallel over the intermediate dimension, down row-parallel;
//   vocab:     embedding and LM head split over contiguous vocabulary ranges.
// The intermediate and vocabulary dimensions may split unevenly (ranges differ by at most one
// unit): the math is the same and real models (e.g. intermediate 172) need it. Head counts must
// divide. The intermediate dimension splits in units of `intermediate_unit` features (1, or 32 for
// quantized weights run as stored, so that a rank's down_proj columns start and end on the
// 32-column groups of the quantized blocks and of the int8 activations).
#pragma once

#include "backend/vocab_shard.hpp"

#include "model_io/model_config.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace selfspec {

struct IndexRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
  bool contains(std::int64_t i) const { return i >= begin && i < end; }
};

// The near-even contiguous split of [0, total) into `parts`: part p gets [p*total/parts, ...).
IndexRange split_range(std::int64_t total, int parts, int part);

struct ShardPlan {
  int tp = 1;
  int rank = 0;
  IndexRange q_heads;       // query heads of this rank
  IndexRange kv_heads;      // KV heads this rank stores (replicated across ranks when tp > n_kv)
  IndexRange intermediate;  // MLP intermediate features of this rank
  std::int64_t intermediate_unit = 1;  // the intermediate range is whole units of this size
  IndexRange vocab;                    // vocabulary rows of this rank (embedding and LM head)
  bool kv_replicated = false;

  // Vocab row counts of every rank (for gathering logits).
  std::vector<std::int64_t> vocab_counts;

  // This rank's vocabulary slice as the backend's logit reductions see it.
  VocabShard vocab_shard() const { return {vocab.begin, vocab.size(), vocab_counts}; }

  // Throws selfspec::Error with the reason when the model cannot be split tp ways.
  // `intermediate_unit` > 1 applies when it divides intermediate_size (else the unit is 1).
  static ShardPlan make(const ModelConfig& config, int tp, int rank,
                        std::int64_t intermediate_unit = 1);
  // The reason the model cannot be split tp ways, or nullopt when it can.
  static std::optional<std::string> check(const ModelConfig& config, int tp,
                                          std::int64_t intermediate_unit = 1);
  // The unit make() uses for this config: `requested` when it divides intermediate_size, else 1.
  static std::int64_t effective_unit(const ModelConfig& config, std::int64_t requested);
};

}  // namespace selfspec
