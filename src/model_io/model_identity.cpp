#include "model_io/model_identity.hpp"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace selfspec {
namespace {

class Fnv1a {
 public:
  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      hash_ ^= p[i];
      hash_ *= 1099511628211ull;
    }
  }
  void text(const std::string& s) { bytes(s.data(), s.size() + 1); }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 14695981039346656037ull;
};

}  // namespace

std::string model_identity(const TensorSource& source, const ModelConfig& config) {
  Fnv1a hash;
  hash.text(fmt::format("{} h{} i{} l{} q{} kv{} d{} v{} theta {} eps {} bias {} tied {}",
                        config.model_type, config.hidden_size, config.intermediate_size,
                        config.num_layers, config.num_heads, config.num_kv_heads, config.head_dim,
                        config.vocab_size, config.rope_theta, config.rms_norm_eps,
                        config.attention_bias, config.tie_word_embeddings));
  std::vector<float> norm(static_cast<std::size_t>(config.hidden_size));
  source.read("model.norm.weight", {0, config.hidden_size, 0, 0}, DType::kF32, norm.data());
  hash.bytes(norm.data(), norm.size() * sizeof(float));
  // Two embedding rows too: norm weights are all ones in some models (and in made-up ones).
  for (const std::int64_t row : {std::int64_t{0}, config.vocab_size - 1}) {
    source.read("model.embed_tokens.weight", {row, row + 1, 0, config.hidden_size}, DType::kF32,
                norm.data());
    hash.bytes(norm.data(), norm.size() * sizeof(float));
  }
  return fmt::format("{:016x}", hash.value());
}

}  // namespace selfspec
