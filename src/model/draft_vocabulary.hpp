// A pruned draft vocabulary: the draft forwards compute the LM head over only V' kept token ids
// (the most frequent ones of a calibration corpus, model_io/draft_vocab_file.hpp) instead of the
// whole vocabulary. Verification keeps the full head, so the output does not change: greedy
// drafts are still verified against the full model's argmax, and speculative sampling stays exact
// because the draft distribution q is simply 0 outside the kept ids.
//
// Built once per model on every rank (same ids everywhere): each rank keeps the ids inside its
// vocabulary shard, sorted ascending, and a gathered copy of their LM-head rows
// [V'_local × hidden] in backend memory, in the head's format (Backend::select_weight_rows). A
// forward with it (ForwardArgs::draft_vocabulary) computes logits = rows · norm(x) and scatters
// them into the usual [rows × vocab_local] output, -inf everywhere else (Backend::scatter_columns),
// so what reads logits above the model works unchanged. A rank whose shard holds no kept id writes
// only -inf (its shard statistics are then empty: max -inf, no argmax).
#pragma once

#include "backend/backend.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace selfspec {

class LlamaModel;

class DraftVocabulary {
 public:
  // `ids`: global token ids, distinct, each in [0, vocab_size) (checked; errors name the id).
  // Every rank passes the same ids.
  DraftVocabulary(LlamaModel& model, std::span<const std::int32_t> ids);

  // V': kept ids over all ranks.
  std::int64_t size() const { return size_; }
  // Kept ids of this rank's shard, as offsets into the shard, ascending.
  const std::vector<std::int32_t>& local_ids() const { return local_ids_; }
  std::int64_t local_size() const { return static_cast<std::int64_t>(local_ids_.size()); }
  // The gathered LM-head rows [local_size × hidden] (empty data when local_size is 0).
  BackendWeight head() const { return {format_, rows_.data(), local_size(), hidden_}; }
  // local_ids() in backend memory.
  const std::int32_t* device_ids() const { return ids_device_.as<const std::int32_t>(); }
  // The LM head it was gathered from (a forward checks it runs on the same model).
  const void* source() const { return source_; }

 private:
  std::int64_t size_ = 0;
  std::vector<std::int32_t> local_ids_;
  WeightFormat format_ = WeightFormat::kF32;
  std::int64_t hidden_ = 0;
  DeviceBuffer rows_;
  DeviceBuffer ids_device_;
  const void* source_ = nullptr;
};

}  // namespace selfspec
