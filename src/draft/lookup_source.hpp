// Lookup drafts as a draft source (draft/draft_source.hpp): where the sequence's last n tokens
// (n from max_ngram down to min_ngram) occurred before in it, the tokens that followed them there
// are the round's draft, with no draft forward (draft/ngram_lookup.hpp: LLMA §2.2, Saxena's
// prompt lookup decoding).
#pragma once

#include "draft/draft_source.hpp"
#include "draft/ngram_lookup.hpp"

#include <memory>

namespace selfspec {

// Throws selfspec::Error when the options are out of range (max_tokens in
// [1, DraftSource::kMaxTokens], NgramLookupOptions::validate).
std::unique_ptr<DraftSource> make_lookup_source(const NgramLookupOptions& options);

}  // namespace selfspec
