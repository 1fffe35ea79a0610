// This rank's slice of a vocabulary-parallel LM head's rows: which ids it holds and how many every
// rank holds (model/shard_plan.hpp's vocabulary split, as the backend's logit reductions see it).
#pragma once

#include <cstdint>
#include <vector>

namespace selfspec {

struct VocabShard {
  std::int64_t begin = 0;            // this rank's first id
  std::int64_t size = 0;             // ids this rank holds: [begin, begin + size)
  std::vector<std::int64_t> counts;  // every rank's id count, in rank order

  bool contains(std::int64_t id) const { return id >= begin && id < begin + size; }
};

}  // namespace selfspec
