// Seeded random weights: written as an HF checkpoint (config.json + safetensors) by
// `selfspec make-model`, or served directly to the engine (SyntheticSource: the synthetic-weights
// run mode, e.g. 70B geometry with a couple of layers at TP 8 on a CPU). Element i of tensor N is
// scale(N) × z(seed, N, i), z a zero-mean unit-variance deviate from a counter-based generator
// (splitmix64 of the seed, the name's hash and i; Irwin–Hall sum of four uniforms), so any slice —
// a rank's rows or columns — is produced without the rest of the tensor, and a checkpoint and the
// in-memory weights of the same seed are bit-identical. (Written by hand: Boost.Random 1.74 has no
// counter-based engine.)
//
// Initialisation keeps a deep random network numerically tame: projections with variance
// 1/fan_in, output projections (o_proj, down_proj) further scaled by 1/sqrt(2 L) so the residual
// stream stays O(1), embeddings with variance 1, norm weights = 1, biases with std 0.02.
#pragma once

#include "core/dtype.hpp"
#include "core/weight_format.hpp"
#include "model_io/model_config.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/tensor_source.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace selfspec {

struct SyntheticModelSpec {
  ModelConfig config;
  DType dtype = DType::kBF16;
  std::uint64_t seed = 0;
  std::uint64_t max_shard_bytes = 0;  // 0: a single model.safetensors
  // Per-layer multipliers of the attention output projection (o_proj) and the MLP output
  // projection (down_proj): a sublayer scaled towards zero barely changes the residual stream
  // (planted redundancy). Empty: 1 everywhere.
  std::vector<double> attention_scale;
  std::vector<double> mlp_scale;
  // Multiplier of the LM head: larger values give peakier next-token distributions.
  double lm_head_scale = 1.0;
  // The weight matrices stored quantized in this format (random blocks of the same deviation:
  // model_io/synthetic_quantized.hpp), where their columns are whole blocks of it; nullopt: dense
  // in `dtype`. Served by SyntheticSource only (make-model writes dense checkpoints).
  std::optional<WeightFormat> matrix_format;
};

// A llama ModelConfig with the given geometry and defaults for everything else.
ModelConfig make_synthetic_config(std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                                  std::int64_t kv_heads, std::int64_t intermediate,
                                  std::int64_t vocab);

// Writes config.json and the safetensors file(s) into `dir` (created if needed).
// Returns the bytes of weights written.
std::uint64_t write_synthetic_model(const SyntheticModelSpec& spec,
                                    const std::filesystem::path& dir);

// Writes the slice (1-D or 2-D tensor `name` of `shape`) into dst as dst_dtype: the values the
// checkpoint would store (rounded to spec.dtype), converted to dst_dtype.
void fill_synthetic_slice(const SyntheticModelSpec& spec, const std::string& name,
                          const std::vector<std::int64_t>& shape, const TensorSlice& slice,
                          DType dst_dtype, void* dst);

// Weights of a synthetic model served straight to the engine.
class SyntheticSource final : public TensorSource {
 public:
  explicit SyntheticSource(SyntheticModelSpec spec);
  void validate(const ModelConfig& config) const override;
  DType dtype(const std::string& name) const override;
  void read(const std::string& name, const TensorSlice& slice, DType dst_dtype,
            void* dst) const override;
  std::string describe() const override;
  std::optional<WeightFormat> quantized_format(const std::string& name) const override;
  QuantizedSlice read_quantized(const std::string& name, const TensorSlice& slice) const override;

 private:
  const std::vector<std::int64_t>& shape_of(const std::string& name) const;
  SyntheticModelSpec spec_;
  std::map<std::string, std::vector<std::int64_t>> shapes_;
};

}  // namespace selfspec
