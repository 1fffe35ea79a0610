#include "launch/training_data/exit_data_outputs.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace selfspec::launch {

std::filesystem::path ExitDataOutputs::dir_for(const std::filesystem::path& out,
                                               std::span<const int> layers, std::size_t i) {
  if (layers.size() == 1) return out;
  return out / fmt::format("exit-layer-{}", layers[i]);
}

ExitDataOutputs::ExitDataOutputs(const std::filesystem::path& out, std::span<const int> layers,
                                 std::int64_t hidden_size, std::int32_t top_k,
                                 const std::function<ExitDataManifest(int)>& fresh, bool resume) {
  SELFSPEC_CHECK(!layers.empty(), "collect-exit-data: no exit layer");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    ExitDataOutput output;
    output.exit_layer = layers[i];
    output.dir = dir_for(out, layers, i);
    output.manifest = fresh(layers[i]);
    output.pending.hidden_size = hidden_size;
    output.pending.top_k = top_k;
    std::filesystem::create_directories(output.dir);
    if (std::optional<ExitDataManifest> existing = load_exit_data_manifest(output.dir)) {
      const std::string path = exit_data_manifest_path(output.dir).string();
      SELFSPEC_CHECK(resume, "{} exists: pass --resume to continue that collection, or remove it",
                     path);
      check_same_collection(*existing, output.manifest, path);
      output.manifest.shards = std::move(existing->shards);
      output.manifest.complete = existing->complete;
    }
    outputs_.push_back(std::move(output));
  }
  align_to_common_shards();
}

// Every directory back to the shards all of them hold (they are written in the same order with
// the same rows, so their shard lists agree up to where one run stopped).
void ExitDataOutputs::align_to_common_shards() {
  std::size_t common = outputs_.front().manifest.shards.size();
  bool complete = true;
  for (const ExitDataOutput& o : outputs_) {
    common = std::min(common, o.manifest.shards.size());
    complete = complete && o.manifest.complete;
  }
  for (ExitDataOutput& o : outputs_) {
    const ExitDataManifest& first = outputs_.front().manifest;
    for (std::size_t s = 0; s < common; ++s) {
      const ExitDataShardEntry& a = first.shards[s];
      const ExitDataShardEntry& b = o.manifest.shards[s];
      SELFSPEC_CHECK(a.file == b.file && a.sequences == b.sequences && a.positions == b.positions,
                     "{} and {} disagree at shard {}: they are not one collection",
                     exit_data_manifest_path(outputs_.front().dir).string(),
                     exit_data_manifest_path(o.dir).string(), s);
    }
    if (o.manifest.shards.size() > common || o.manifest.complete != complete) {
      log::info(
          "collect-exit-data: {} goes back to the {} shards every exit layer's directory "
          "holds",
          o.dir.string(), common);
      o.manifest.shards.resize(common);
      o.manifest.complete = complete;
    }
  }
}

void ExitDataOutputs::add(std::vector<ExitDataRows>&& rows) {
  SELFSPEC_CHECK(rows.size() == outputs_.size(),
                 "collect-exit-data: a sequence has rows for {} exit layers, not {}", rows.size(),
                 outputs_.size());
  for (std::size_t i = 0; i < rows.size(); ++i) outputs_[i].pending.append(rows[i]);
  ++pending_sequences_;
}

void ExitDataOutputs::flush(double positions_per_s) {
  if (pending_sequences_ == 0) return;
  for (ExitDataOutput& o : outputs_) {
    const std::string file = fmt::format("shard-{:05}.safetensors", o.manifest.shards.size());
    write_exit_data_shard(o.pending, o.dir / file);
    o.manifest.shards.push_back({file, pending_sequences_, o.pending.positions()});
    save_exit_data_manifest(o.dir, o.manifest);
    o.pending.clear();
  }
  const ExitDataManifest& m = outputs_.front().manifest;
  log::info(
      "collect-exit-data: {} ({} sequences, {} positions{}); {} sequences, {} positions so far, "
      "{:.0f} positions/s",
      m.shards.back().file, pending_sequences_, m.shards.back().positions,
      outputs_.size() > 1 ? fmt::format(", in each of {} directories", outputs_.size()) : "",
      m.sequences(), m.positions(), positions_per_s);
  pending_sequences_ = 0;
}

void ExitDataOutputs::finish() {
  for (ExitDataOutput& o : outputs_) {
    o.manifest.complete = true;
    save_exit_data_manifest(o.dir, o.manifest);
  }
}

}  // namespace selfspec::launch
