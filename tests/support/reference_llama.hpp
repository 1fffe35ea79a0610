// The test oracle: a naive LLaMA forward in double precision, written from the HuggingFace
// definitions (LlamaRMSNorm, LlamaRotaryEmbedding with default/linear/llama3 scaling,
// apply_rotary_pos_emb's rotate-half, repeat_kv for GQA, eager attention with a causal mask,
// SiLU-gated MLP). It shares no code with the engine's kernels or model: plain loops over
// std::vector<double>, the whole sequence recomputed (no KV cache).
#pragma once

#include "model_io/model_config.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace selfspec::testing {

// Weights as doubles, row-major, with the values the checkpoint stores (already rounded to its
// dtype), full (unsharded) shapes as in HF.
struct ReferenceLayer {
  std::vector<double> attention_norm, mlp_norm;  // [H]
  std::vector<double> wq, wk, wv, wo;            // [Hq*d × H], [Hkv*d × H] ×2, [H × Hq*d]
  std::vector<double> bq, bk, bv;                // empty unless attention_bias
  std::vector<double> bo;                        // [H]; LLaMA with attention_bias (not Qwen2)
  std::vector<double> w_gate, w_up, w_down;      // [I × H] ×2, [H × I]
};

struct ReferenceWeights {
  ModelConfig config;
  std::vector<double> embedding;  // [V × H]
  std::vector<double> lm_head;    // [V × H]; equals embedding when tied
  std::vector<double> final_norm;
  std::vector<ReferenceLayer> layers;
  // Round every matmul's input to bf16 first, as the CPU engine does for bf16 weights
  // (kernels/cpu/bf16_matmul.hpp); set it when the model under test runs bf16 weights on the CPU.
  bool bf16_activations = false;
};

struct ReferenceSkips {
  std::vector<int> attention;  // 0-based layers whose attention sublayer is skipped
  std::vector<int> mlp;
};

// Sees the residual stream of every position [T][H] entering (after_attention false) and leaving
// (true) each layer's attention sublayer, and last, as layer L entering, the final residual (the
// final norm's input).
using ReferenceResidualObserver = std::function<void(
    int layer, bool after_attention, const std::vector<std::vector<double>>& residual)>;

// Logits [T][V] of every position of `tokens` (positions 0..T-1, causal).
std::vector<std::vector<double>> reference_forward(const ReferenceWeights& weights,
                                                   const std::vector<std::int32_t>& tokens,
                                                   const ReferenceSkips& skips = {},
                                                   const ReferenceResidualObserver& observe = {});

// The same from residual rows x [T][H] instead of token embeddings (w.embedding is not read):
// w.layers over them, then the final norm and LM head. A feature head's layer over its input rows
// is such a one-layer model.
std::vector<std::vector<double>> reference_forward_rows(
    const ReferenceWeights& weights, std::vector<std::vector<double>> x,
    const ReferenceSkips& skips = {}, const ReferenceResidualObserver& observe = {});

// Greedy continuation of `prompt` by `n` tokens (recomputing the whole sequence each step).
std::vector<std::int32_t> reference_greedy(const ReferenceWeights& weights,
                                           const std::vector<std::int32_t>& prompt, int n,
                                           const ReferenceSkips& skips = {});

}  // namespace selfspec::testing
