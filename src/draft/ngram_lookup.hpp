// Lookup drafts: copied text needs no forward. The last n tokens of the sequence so far (prompt
// and output) are looked up in the same sequence; where they occurred before, the tokens that
// followed them there are the draft (Yang et al., "Inference with Reference: Lossless Acceleration
// of Large Language Models" (LLMA), 2023, §2.2: copy the text after a matched span; Saxena,
// "Prompt Lookup Decoding", 2023: match the last n-gram against the prompt, longest n first). The
// most recent earlier occurrence of the longest n-gram with a continuation wins (recent text is the
// likelier to repeat). Deterministic integer work on rank 0's token ids: no floating point.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace selfspec {

struct NgramLookupOptions {
  int max_ngram = 3;   // the longest suffix tried first
  int min_ngram = 2;   // the shortest suffix that may match (1 matches too readily)
  int max_tokens = 4;  // most tokens proposed

  // Throws selfspec::Error for options out of range (min_ngram < 1, max_ngram < min_ngram,
  // max_tokens < 0).
  void validate() const;
};

// The continuation of the longest (n from max_ngram down to min_ngram) suffix of `history` that
// also occurs earlier in it (the latest such occurrence), at most max_tokens tokens and never past
// the end of `history`; empty when no suffix of min_ngram tokens or more recurs. Validates the
// options.
std::vector<std::int32_t> ngram_lookup(std::span<const std::int32_t> history,
                                       const NgramLookupOptions& options);

}  // namespace selfspec
