// DraftVocabulary: selecting this rank's kept ids and gathering their LM-head rows.
#include "model/draft_vocabulary.hpp"

#include "core/error.hpp"
#include "model/llama_model.hpp"

#include <algorithm>
#include <cstddef>
#include <unordered_set>

namespace selfspec {
namespace {

// This shard's kept ids as offsets into the shard, ascending; checks range and uniqueness.
std::vector<std::int32_t> shard_ids(std::span<const std::int32_t> ids, std::int64_t vocab_size,
                                    const IndexRange& shard) {
  std::unordered_set<std::int32_t> seen;
  std::vector<std::int32_t> local;
  for (const std::int32_t id : ids) {
    SELFSPEC_CHECK(id >= 0 && id < vocab_size,
                   "draft vocabulary: token id {} is outside the model's vocabulary [0, {})", id,
                   vocab_size);
    SELFSPEC_CHECK(seen.insert(id).second, "draft vocabulary: token id {} is listed twice", id);
    if (shard.contains(id)) local.push_back(static_cast<std::int32_t>(id - shard.begin));
  }
  std::sort(local.begin(), local.end());
  return local;
}

}  // namespace

DraftVocabulary::DraftVocabulary(LlamaModel& model, std::span<const std::int32_t> ids)
    : size_(static_cast<std::int64_t>(ids.size())),
      local_ids_(shard_ids(ids, model.config().vocab_size, model.shard().vocab)) {
  SELFSPEC_CHECK(!ids.empty(), "draft vocabulary: no token ids");
  const Matrix& head = model.weights().output_matrix();
  Backend& backend = model.backend();
  format_ = head.format;
  hidden_ = head.cols;
  source_ = head.data.data();
  if (local_ids_.empty()) return;
  // Done once per model: the backend copies the rows in its own layout (through the host).
  rows_ = backend.select_weight_rows(head.view(), local_ids_);
  ids_device_ = backend.allocate(local_ids_.size() * sizeof(std::int32_t));
  backend.upload(ids_device_.data(), local_ids_.data(), local_ids_.size() * sizeof(std::int32_t));
}

}  // namespace selfspec
