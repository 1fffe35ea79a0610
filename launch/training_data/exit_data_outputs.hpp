// Where `collect-exit-data` writes its rows: one data directory per exit layer — the --out
// directory itself for one layer, --out/exit-layer-N for each of several (one pass records them
// all: training_data/exit_data_collector.hpp) — each a whole collection in the
// "selfspec-exit-data" format (exit_data_manifest.hpp) that scripts/train_exit_head.py reads.
// The directories are written in lockstep: the same sequences in the same shards, each
// directory's manifest rewritten after its shard. A resumed run continues after the last shard
// that every directory holds (an interruption between two directories' shards loses at most
// that shard, which is written again). Rank 0 only.
#pragma once

#include "launch/training_data/exit_data_manifest.hpp"
#include "training_data/exit_data_rows.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

namespace selfspec::launch {

struct ExitDataOutput {
  int exit_layer = 0;
  std::filesystem::path dir;
  ExitDataManifest manifest;
  ExitDataRows pending;  // rows of the shard being gathered
};

class ExitDataOutputs {
 public:
  // The directory of exit layer `layers[i]` under `out`.
  static std::filesystem::path dir_for(const std::filesystem::path& out,
                                       std::span<const int> layers, std::size_t i);

  // Creates the directories and starts each manifest from fresh(exit layer), or with `resume`
  // continues the existing ones (which must be the same collection: check_same_collection);
  // without it, refuses to touch an existing manifest.
  ExitDataOutputs(const std::filesystem::path& out, std::span<const int> layers,
                  std::int64_t hidden_size, std::int32_t top_k,
                  const std::function<ExitDataManifest(int)>& fresh, bool resume);

  std::vector<ExitDataOutput>& outputs() { return outputs_; }
  const std::vector<ExitDataOutput>& outputs() const { return outputs_; }
  // Sequences every directory holds, and whether the collection is complete in all of them.
  std::int64_t sequences() const { return outputs_.front().manifest.sequences(); }
  bool complete() const { return outputs_.front().manifest.complete; }
  const ExitDataManifest& first_manifest() const { return outputs_.front().manifest; }

  // One finished sequence's rows, one per exit layer in the constructor's order.
  void add(std::vector<ExitDataRows>&& rows);
  std::int64_t pending_positions() const { return outputs_.front().pending.positions(); }
  // Writes the pending rows as the next shard of every directory, then its manifest.
  void flush(double positions_per_s);
  // Marks every directory complete.
  void finish();

 private:
  void align_to_common_shards();

  std::vector<ExitDataOutput> outputs_;
  std::int64_t pending_sequences_ = 0;
};

}  // namespace selfspec::launch
