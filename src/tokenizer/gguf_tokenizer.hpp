// The tokenizer a GGUF file's metadata describes (gguf_vocab.hpp), built as llama.cpp and HF's
// GGUF loader build it:
//   tokenizer.ggml.model "gpt2"   byte-level BPE: BpeTokenizer on the equivalent tokenizer.json
//                                 (gguf_bpe.hpp: merges, pre-tokenizer of tokenizer.ggml.pre,
//                                 control and user-defined tokens split out whole)
//   tokenizer.ggml.model "llama"  SentencePiece BPE: libsentencepiece on the equivalent model
//                                 (sentencepiece_model_proto.hpp), with control, unknown and
//                                 user-defined tokens split out of the text first; each piece of
//                                 text in between gets SentencePiece's prefix space, as in
//                                 llama.cpp and HF's legacy LLaMA tokenizer
// BOS and EOS come from the metadata: encode(text, true) adds BOS when add_bos_token (absent: true
// for "llama" and LLaMA-3's pre-tokenizer, as llama.cpp) and EOS when add_eos_token; bos_id() is
// bos_token_id; eos_ids() are eos_token_id, eot_token_id and eom_token_id. The chat template is
// tokenizer.chat_template.
#pragma once

#include "tokenizer/tokenizer.hpp"

#include <memory>

namespace selfspec {

class GgufFile;

// Throws selfspec::Error naming the file and key for anything unsupported or inconsistent
// (another tokenizer.ggml.model or pre, arrays of the wrong length, ids out of range).
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& file);

}  // namespace selfspec
