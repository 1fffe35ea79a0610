#include "model_io/checkpoint_layout.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

namespace selfspec {
namespace {

// Names that may appear in a checkpoint and are not used (computed buffers of old exports).
bool is_ignorable(std::string_view name) {
  return name.ends_with("rotary_emb.inv_freq");
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace

std::string layer_tensor_name(std::int64_t layer, std::string_view suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config) {
  const std::int64_t hidden = config.hidden_size;
  std::vector<ExpectedTensor> tensors;
  tensors.push_back({"model.embed_tokens.weight", {config.vocab_size, hidden}});
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    tensors.push_back({layer_tensor_name(l, "input_layernorm.weight"), {hidden}});
    tensors.push_back({layer_tensor_name(l, "self_attn.q_proj.weight"), {config.q_dim(), hidden}});
    tensors.push_back({layer_tensor_name(l, "self_attn.k_proj.weight"), {config.kv_dim(), hidden}});
    tensors.push_back({layer_tensor_name(l, "self_attn.v_proj.weight"), {config.kv_dim(), hidden}});
    tensors.push_back({layer_tensor_name(l, "self_attn.o_proj.weight"), {hidden, config.q_dim()}});
    if (config.attention_bias) {
      tensors.push_back({layer_tensor_name(l, "self_attn.q_proj.bias"), {config.q_dim()}});
      tensors.push_back({layer_tensor_name(l, "self_attn.k_proj.bias"), {config.kv_dim()}});
      tensors.push_back({layer_tensor_name(l, "self_attn.v_proj.bias"), {config.kv_dim()}});
    }
    if (config.o_proj_bias()) {
      tensors.push_back({layer_tensor_name(l, "self_attn.o_proj.bias"), {hidden}});
    }
    tensors.push_back({layer_tensor_name(l, "post_attention_layernorm.weight"), {hidden}});
    tensors.push_back(
        {layer_tensor_name(l, "mlp.gate_proj.weight"), {config.intermediate_size, hidden}});
    tensors.push_back(
        {layer_tensor_name(l, "mlp.up_proj.weight"), {config.intermediate_size, hidden}});
    tensors.push_back(
        {layer_tensor_name(l, "mlp.down_proj.weight"), {hidden, config.intermediate_size}});
  }
  tensors.push_back({"model.norm.weight", {hidden}});
  // With tied embeddings an lm_head.weight may still be present (some exporters write it); it is
  // then checked but unused.
  tensors.push_back({"lm_head.weight", {config.vocab_size, hidden}, !config.tie_word_embeddings});
  return tensors;
}

void validate_checkpoint(const Checkpoint& checkpoint, const ModelConfig& config) {
  std::set<std::string, std::less<>> known;
  for (const ExpectedTensor& expected : expected_tensors(config)) {
    known.insert(expected.name);
    if (!checkpoint.contains(expected.name)) {
      if (!expected.required) continue;
      if (expected.name == "lm_head.weight") {
        fail(
            "tensor 'lm_head.weight' is missing from {} (config.json has tie_word_embeddings = "
            "false, so the checkpoint must carry its own LM head)",
            checkpoint.directory().string());
      }
      fail("tensor '{}' is missing from {} (expected by config.json: {} layers{})", expected.name,
           checkpoint.directory().string(), config.num_layers,
           config.attention_bias ? ", attention_bias" : "");
    }
    const TensorInfo& info = checkpoint.tensor(expected.name);
    if (info.shape != expected.shape) {
      fail("tensor '{}' in {} has shape {} but config.json implies {}", expected.name,
           checkpoint.file_of(info).string(), shape_string(info.shape),
           shape_string(expected.shape));
    }
  }
  for (const std::string& name : checkpoint.tensor_names()) {
    if (known.contains(name) || is_ignorable(name)) continue;
    const TensorInfo& info = checkpoint.tensor(name);
    fail("tensor '{}' in {} is not part of a {} model with the config.json geometry ({} layers{})",
         name, checkpoint.file_of(info).string(), config.model_type, config.num_layers,
         config.attention_bias ? "" : ", no attention bias");
  }
}

}  // namespace selfspec
