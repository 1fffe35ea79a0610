// The count-vocab file (`selfspec count-vocab --out FILE`): token ids counted on a calibration
// corpus, most frequent first, from which a pruned draft vocabulary takes its V' ids
// (model/draft_vocabulary.hpp, --draft-vocab / --draft-vocab-size):
//   {"model": "...", "source": "...", "tokens_counted": N, "ids": [most frequent first],
//    "counts": [count of each id]}
// and the choice of the kept ids from such a ranking (or a skip set's draft_vocab).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

struct DraftVocabFile {
  std::string model;   // the model the ids were counted for
  std::string source;  // what was counted (prompts file, split, continuation length)
  std::int64_t tokens_counted = 0;
  std::vector<std::int32_t> ids;     // distinct, most frequent first
  std::vector<std::int64_t> counts;  // counts[i]: occurrences of ids[i] (non-increasing)
};

// The ranking of `counts` (occurrences per token id, index = id): every id, most frequent first,
// ties by ascending id — so ids never seen in the calibration text follow in id order (for BPE
// vocabularies the merge order, a rough proxy of frequency) and any V' up to the vocabulary size
// can be chosen.
DraftVocabFile rank_token_counts(std::span<const std::int64_t> counts);

void save_draft_vocab_file(const std::filesystem::path& file, const DraftVocabFile& vocab);
// Errors name `option` (e.g. "--draft-vocab"), the file and the key or index at fault: not JSON,
// a missing or mistyped key, a negative or repeated id, counts not matching the ids.
DraftVocabFile load_draft_vocab_file(const std::filesystem::path& file, std::string_view option);

// The kept ids of a pruned draft vocabulary: the first `size` ids of `ranked` (all of them when
// size is nullopt), then every EOS id not among them (a draft must be able to end). Errors name
// `size_option` when size is outside [1, ranked.size()], and `origin` (the file or skip set the
// ranking came from) when an id lies outside the model's vocabulary [0, vocab_size).
std::vector<std::int32_t> select_draft_vocab(std::span<const std::int32_t> ranked,
                                             std::optional<std::int64_t> size,
                                             std::span<const std::int32_t> eos_ids,
                                             std::int64_t vocab_size, std::string_view size_option,
                                             std::string_view origin);

}  // namespace selfspec
