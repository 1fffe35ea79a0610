// The SentencePiece model (sentencepiece_model.proto's ModelProto, serialized) that a GGUF "llama"
// vocabulary stands for, for SentencePieceProcessor::LoadFromSerializedProto: every token as a
// piece with its score and type, the BPE algorithm (what llama.cpp runs on these vocabularies:
// merge the best-scoring adjacent pair first) with byte fallback when the vocabulary has byte
// tokens, and the identity normalizer with the file's whitespace flags.
#pragma once

#include <string>

namespace selfspec {

struct GgufVocab;

// Throws selfspec::Error naming the file and key when the vocabulary lacks what SentencePiece
// needs (scores, an unknown token).
std::string gguf_sentencepiece_model_proto(const GgufVocab& vocab);

}  // namespace selfspec
