// A GGUF "gpt2" vocabulary (byte-level BPE: tokens, merges, token types) as the HF tokenizer.json
// it stands for, ready for BpeTokenizer: the model's vocabulary and merges, its control and
// user-defined tokens as added tokens (split out of the text whole), and the pre-tokenizer that
// tokenizer.ggml.pre names:
//   default, gpt2          ByteLevel with GPT-2's regex
//   llama-bpe (llama3,     LLaMA-3's Split regex (1-3 digit numbers, case-insensitive
//   llama-v3)              contractions), then ByteLevel without regex; ignore_merges as LLaMA-3's
//                          tokenizer.json and llama.cpp have it
//   qwen2                  Qwen2's Split regex (single digits), then ByteLevel without regex
//   smollm                 Digits(individual), then ByteLevel with GPT-2's regex (SmolLM's
//                          tokenizer.json; llama.cpp's \p{N} split then the GPT-2 regex)
// No normalizer (Qwen2's own tokenizer.json has NFC; neither llama.cpp nor HF's GGUF loader
// applies it) and no post-processor: BOS/EOS are the caller's (GgufTokenizer).
#pragma once

#include <string>

namespace selfspec {

struct GgufVocab;

// The tokenizer.json text; throws selfspec::Error naming the file and key (an unsupported
// tokenizer.ggml.pre, a merge that is not two vocabulary tokens whose concatenation is one).
std::string gguf_bpe_tokenizer_json(const GgufVocab& vocab);

}  // namespace selfspec
