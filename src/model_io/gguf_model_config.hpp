// The model architecture of a GGUF file, from its `general.architecture` and `<arch>.*` metadata
// (the keys llama.cpp's converter writes), as the ModelConfig a config.json would give.
// Architectures: llama (LLaMA-1/2/3, SmolLM, CodeLLaMA) and qwen2 (q/k/v bias). Anything the
// engine cannot run exactly (other architectures, YaRN rope scaling, LLaMA-3.1 rope_freqs,
// partial rotary dims, differing key/value head sizes) is refused with the key named.
#pragma once

#include "model_io/gguf_file.hpp"
#include "model_io/model_config.hpp"

namespace selfspec {

ModelConfig model_config_from_gguf(const GgufFile& file);

}  // namespace selfspec
