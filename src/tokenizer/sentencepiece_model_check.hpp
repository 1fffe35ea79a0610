// The check of a serialized SentencePiece model (tokenizer.model) that libsentencepiece does not
// make before trusting it: its precompiled character maps. A model's normalizer_spec and
// denormalizer_spec may carry one (a darts-clone double-array trie over input bytes, followed by
// the NUL-terminated replacement strings its leaves point to); libsentencepiece walks it without
// bounds checks, so a corrupt map crashes encode() or decode() (fuzzing found it). LLaMA's
// tokenizer.model has none; spm_train's default rules (nmt_nfkc) make one.
#pragma once

#include <string_view>

namespace selfspec {

// Walks every trie node that some input could reach and throws selfspec::Error naming `source`
// and the field when a read would leave the trie or a replacement string would leave the map,
// or when the model is not a protobuf message at all.
void check_sentencepiece_model(std::string_view serialized, std::string_view source);

}  // namespace selfspec
