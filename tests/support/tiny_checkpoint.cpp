#include "tests/support/tiny_checkpoint.hpp"

#include "model_io/safetensors_writer.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <stdexcept>

namespace selfspec::testing {
namespace {

class WeightSource {
 public:
  WeightSource(std::uint64_t seed, DType dtype) : rng_(seed), dtype_(dtype) {}

  // Uniform in [-bound, bound], rounded to the storage dtype; returns the stored values.
  std::vector<double> uniform(std::size_t n, double bound) {
    std::uniform_real_distribution<double> dist(-bound, bound);
    std::vector<double> values(n);
    for (double& v : values) v = round_to_dtype(dist(rng_));
    return values;
  }
  std::vector<double> around_one(std::size_t n, double spread) {
    std::uniform_real_distribution<double> dist(1.0 - spread, 1.0 + spread);
    std::vector<double> values(n);
    for (double& v : values) v = round_to_dtype(dist(rng_));
    return values;
  }
  // Norm weights and biases are stored in the checkpoint dtype too.
  double round_to_dtype(double value) const {
    float f = static_cast<float>(value);
    switch (dtype_) {
      case DType::kF32:
        return f;
      case DType::kBF16:
        return bf16_to_f32(f32_to_bf16(f));
      case DType::kF16:
        return f16_to_f32(f32_to_f16(f));
    }
    return f;
  }

 private:
  std::mt19937_64 rng_;
  DType dtype_;
};

void add_tensor(SafetensorsWriter& writer, const std::string& name, DType dtype,
                std::vector<std::int64_t> shape, const std::vector<double>& values) {
  writer.add(name, dtype, std::move(shape), [values, dtype](std::span<std::byte> out) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      store_from_f32(dtype, out.data(), i, static_cast<float>(values[i]));
    }
  });
}

}  // namespace

ModelConfig tiny_config(const TinyModelSpec& spec) {
  ModelConfig c;
  c.model_type = spec.model_type;
  c.num_layers = spec.layers;
  c.hidden_size = spec.hidden;
  c.num_heads = spec.heads;
  c.num_kv_heads = spec.kv_heads;
  c.head_dim = spec.head_dim > 0 ? spec.head_dim : spec.hidden / spec.heads;
  c.intermediate_size = spec.intermediate;
  c.vocab_size = spec.vocab;
  c.max_position_embeddings = spec.max_position;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = spec.rope_theta;
  c.rope_scaling = spec.rope_scaling;
  c.attention_bias = spec.attention_bias;
  c.tie_word_embeddings = spec.tie;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  c.torch_dtype = spec.dtype;
  return c;
}

ReferenceWeights write_tiny_checkpoint(const TinyModelSpec& spec,
                                       const std::filesystem::path& dir) {
  ReferenceWeights w;
  w.config = tiny_config(spec);
  const ModelConfig& c = w.config;
  const auto H = static_cast<std::size_t>(c.hidden_size);
  const auto q_dim = static_cast<std::size_t>(c.q_dim());
  const auto kv_dim = static_cast<std::size_t>(c.kv_dim());
  const auto inter = static_cast<std::size_t>(c.intermediate_size);
  const auto V = static_cast<std::size_t>(c.vocab_size);
  const auto s = spec.scale;
  WeightSource source(spec.seed, spec.dtype);
  SafetensorsWriter writer;
  const DType dt = spec.dtype;
  const auto bound = [&](std::size_t fan_in) {
    return s * std::sqrt(3.0 / static_cast<double>(fan_in));
  };

  w.embedding = source.uniform(V * H, 1.0);
  add_tensor(writer, "model.embed_tokens.weight", dt, {c.vocab_size, c.hidden_size}, w.embedding);
  w.layers.resize(static_cast<std::size_t>(c.num_layers));
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    ReferenceLayer& L = w.layers[static_cast<std::size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    L.attention_norm = source.around_one(H, 0.2);
    L.wq = source.uniform(q_dim * H, bound(H));
    L.wk = source.uniform(kv_dim * H, bound(H));
    L.wv = source.uniform(kv_dim * H, bound(H));
    L.wo = source.uniform(H * q_dim, bound(q_dim));
    L.mlp_norm = source.around_one(H, 0.2);
    L.w_gate = source.uniform(inter * H, bound(H));
    L.w_up = source.uniform(inter * H, bound(H));
    L.w_down = source.uniform(H * inter, bound(inter));
    add_tensor(writer, p + "input_layernorm.weight", dt, {c.hidden_size}, L.attention_norm);
    add_tensor(writer, p + "self_attn.q_proj.weight", dt, {c.q_dim(), c.hidden_size}, L.wq);
    add_tensor(writer, p + "self_attn.k_proj.weight", dt, {c.kv_dim(), c.hidden_size}, L.wk);
    add_tensor(writer, p + "self_attn.v_proj.weight", dt, {c.kv_dim(), c.hidden_size}, L.wv);
    add_tensor(writer, p + "self_attn.o_proj.weight", dt, {c.hidden_size, c.q_dim()}, L.wo);
    if (c.attention_bias) {
      L.bq = source.uniform(q_dim, 0.5);
      L.bk = source.uniform(kv_dim, 0.5);
      L.bv = source.uniform(kv_dim, 0.5);
      add_tensor(writer, p + "self_attn.q_proj.bias", dt, {c.q_dim()}, L.bq);
      add_tensor(writer, p + "self_attn.k_proj.bias", dt, {c.kv_dim()}, L.bk);
      add_tensor(writer, p + "self_attn.v_proj.bias", dt, {c.kv_dim()}, L.bv);
    }
    if (c.o_proj_bias()) {
      L.bo = source.uniform(H, 0.5);
      add_tensor(writer, p + "self_attn.o_proj.bias", dt, {c.hidden_size}, L.bo);
    }
    add_tensor(writer, p + "post_attention_layernorm.weight", dt, {c.hidden_size}, L.mlp_norm);
    add_tensor(writer, p + "mlp.gate_proj.weight", dt, {c.intermediate_size, c.hidden_size},
               L.w_gate);
    add_tensor(writer, p + "mlp.up_proj.weight", dt, {c.intermediate_size, c.hidden_size}, L.w_up);
    add_tensor(writer, p + "mlp.down_proj.weight", dt, {c.hidden_size, c.intermediate_size},
               L.w_down);
  }
  w.final_norm = source.around_one(H, 0.2);
  add_tensor(writer, "model.norm.weight", dt, {c.hidden_size}, w.final_norm);
  if (c.tie_word_embeddings) {
    w.lm_head = w.embedding;
  } else {
    w.lm_head = source.uniform(V * H, s * bound(H) * 4.0);
    add_tensor(writer, "lm_head.weight", dt, {c.vocab_size, c.hidden_size}, w.lm_head);
  }
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir / "config.json");
    if (!out) throw std::runtime_error("cannot write " + (dir / "config.json").string());
    out << c.to_json().dump(2);
  }
  writer.write(dir, spec.max_shard_bytes);
  return w;
}

}  // namespace selfspec::testing
