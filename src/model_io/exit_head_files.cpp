#include "model_io/exit_head_files.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/safetensors_file_output.hpp"
#include "model_io/safetensors_writer.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <map>

namespace selfspec {
namespace {

// The expected shape of every tensor of the model, by name.
std::map<std::string, std::vector<std::int64_t>> expected_shapes(const ModelConfig& config) {
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const ExpectedTensor& t : expected_tensors(config)) shapes[t.name] = t.shape;
  return shapes;
}

// Reads the whole 1-D or 2-D tensor `name` as `dtype` into the writer's buffer.
SafetensorsWriter::FillFn read_whole(const TensorSource& source, std::string name,
                                     std::vector<std::int64_t> shape, DType dtype) {
  return
      [&source, name = std::move(name), shape = std::move(shape), dtype](std::span<std::byte> out) {
        TensorSlice slice;
        slice.row_end = shape[0];
        slice.col_end = shape.size() > 1 ? shape[1] : 0;
        source.read(name, slice, dtype, out.data());
      };
}

}  // namespace

std::vector<std::string> exit_layer_suffixes(const ModelConfig& config) {
  std::vector<std::string> suffixes = {"input_layernorm.weight", "self_attn.q_proj.weight",
                                       "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                       "self_attn.o_proj.weight"};
  if (config.attention_bias) {
    suffixes.insert(suffixes.end(),
                    {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"});
  }
  if (config.o_proj_bias()) suffixes.emplace_back("self_attn.o_proj.bias");
  suffixes.insert(suffixes.end(), {"post_attention_layernorm.weight", "mlp.gate_proj.weight",
                                   "mlp.up_proj.weight", "mlp.down_proj.weight"});
  return suffixes;
}

void write_init_layer(const TensorSource& source, const ModelConfig& config, int exit_layer,
                      const std::string& model_identity, const std::filesystem::path& path) {
  SELFSPEC_CHECK(exit_layer >= 1 && exit_layer <= config.num_layers,
                 "init layer: exit layer {} is outside [1, {}]", exit_layer, config.num_layers);
  const int source_layer = std::min(exit_layer, static_cast<int>(config.num_layers) - 1);
  const auto shapes = expected_shapes(config);
  SafetensorsWriter writer;
  for (const std::string& suffix : exit_layer_suffixes(config)) {
    const std::string name = layer_tensor_name(source_layer, suffix);
    const std::vector<std::int64_t>& shape = shapes.at(name);
    writer.add("exit_layer." + suffix, DType::kF32, shape,
               read_whole(source, name, shape, DType::kF32));
  }
  writer.set_metadata("format", "selfspec-exit-head");
  writer.set_metadata("model_identity", model_identity);
  writer.set_metadata("exit_layer", std::to_string(exit_layer));
  writer.set_metadata("hidden_size", std::to_string(config.hidden_size));
  writer.set_metadata("num_layers", std::to_string(config.num_layers));
  writer.set_metadata("trained_on", fmt::format("none (layer {}'s weights)", source_layer));
  write_safetensors_file(writer, path);
}

void write_frozen_tensors(const TensorSource& source, const ModelConfig& config,
                          const std::filesystem::path& path, bool with_embedding) {
  const std::string head =
      config.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  SafetensorsWriter writer;
  writer.add("model.norm.weight", DType::kF32, {config.hidden_size},
             read_whole(source, "model.norm.weight", {config.hidden_size}, DType::kF32));
  writer.add("lm_head.weight", DType::kBF16, {config.vocab_size, config.hidden_size},
             read_whole(source, head, {config.vocab_size, config.hidden_size}, DType::kBF16));
  if (with_embedding && !config.tie_word_embeddings) {
    writer.add("model.embed_tokens.weight", DType::kBF16, {config.vocab_size, config.hidden_size},
               read_whole(source, "model.embed_tokens.weight",
                          {config.vocab_size, config.hidden_size}, DType::kBF16));
  }
  writer.set_metadata("format", "selfspec-exit-frozen");
  writer.set_metadata("lm_head_source", head);
  write_safetensors_file(writer, path);
}

}  // namespace selfspec
