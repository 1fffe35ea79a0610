#include "model/llama_model.hpp"

#include "core/error.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/rope.hpp"
#include "model/rope_frequencies.hpp"

#include <chrono>
#include <cmath>
#include <cstring>

namespace selfspec {
namespace kc = kernels::cpu;

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

LlamaModel::LlamaModel(ModelConfig config, ShardPlan shard, LlamaWeights weights,
                       Communicator& comm)
    : config_(std::move(config)),
      shard_(std::move(shard)),
      weights_(std::move(weights)),
      comm_(comm),
      inv_freq_(rope_inverse_frequencies(config_)),
      full_plan_(LayerPlan::full(static_cast<int>(config_.num_layers))),
      q_local_(shard_.q_heads.size()),
      kv_local_(shard_.kv_heads.size()),
      inter_local_(shard_.intermediate.size()) {
  SELFSPEC_CHECK(comm_.size() == shard_.tp && comm_.rank() == shard_.rank,
                 "shard plan for rank {}/{} used on communicator rank {}/{}", shard_.rank,
                 shard_.tp, comm_.rank(), comm_.size());
}

KvCache LlamaModel::make_kv_cache(std::int64_t capacity) const {
  return KvCache(config_.num_layers, kv_local_, config_.head_dim, capacity);
}

void LlamaModel::all_reduce(float* data, std::int64_t count) {
  if (comm_.size() == 1) return;
  const auto start = Clock::now();
  comm_.all_reduce_sum({data, static_cast<std::size_t>(count)});
  counters_.comm_seconds += seconds_since(start);
  ++counters_.all_reduces;
}

void LlamaModel::forward(const ForwardArgs& args, KvCache& kv, std::vector<float>& logits) {
  const auto start = Clock::now();
  const std::int64_t n_tokens = static_cast<std::int64_t>(args.tokens.size());
  const std::int64_t hidden = config_.hidden_size;
  const LayerPlan& plan = args.plan != nullptr ? *args.plan : full_plan_;
  SELFSPEC_CHECK(n_tokens > 0, "forward needs at least one token");
  SELFSPEC_CHECK(args.positions.size() == args.tokens.size(), "forward: {} tokens but {} positions",
                 args.tokens.size(), args.positions.size());
  SELFSPEC_CHECK(plan.num_layers() == config_.num_layers,
                 "layer plan covers {} layers but the model has {}", plan.num_layers(),
                 config_.num_layers);
  SELFSPEC_CHECK(
      args.mask == nullptr || args.mask->is_causal() || args.mask->n_tokens() == n_tokens,
      "tree mask is for {} tokens but the forward has {}", args.mask->n_tokens(), n_tokens);
  SELFSPEC_CHECK(kv.length() + n_tokens <= kv.capacity(),
                 "KV cache full: {} cached + {} new tokens exceed its capacity of {}", kv.length(),
                 n_tokens, kv.capacity());
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    const std::int32_t token = args.tokens[static_cast<std::size_t>(t)];
    SELFSPEC_CHECK(token >= 0 && token < config_.vocab_size,
                   "token id {} is outside the vocabulary [0, {})", token, config_.vocab_size);
    SELFSPEC_CHECK(args.positions[static_cast<std::size_t>(t)] >= 0, "negative position {}",
                   args.positions[static_cast<std::size_t>(t)]);
  }
  for (std::int32_t row : args.logit_rows) {
    SELFSPEC_CHECK(row >= 0 && row < n_tokens, "logit row {} is outside [0, {})", row, n_tokens);
  }

  const auto tokens_n = static_cast<std::size_t>(n_tokens);
  x_.ensure(tokens_n * hidden);
  h_.ensure(tokens_n * hidden);
  o_.ensure(tokens_n * hidden);
  q_.ensure(tokens_n * q_local_ * config_.head_dim);
  attn_.ensure(tokens_n * q_local_ * config_.head_dim);
  k_.ensure(tokens_n * kv_local_ * config_.head_dim);
  v_.ensure(tokens_n * kv_local_ * config_.head_dim);
  gate_.ensure(tokens_n * inter_local_);
  up_.ensure(tokens_n * inter_local_);

  const auto observe = [&](std::string_view name, int layer, const float* data, std::int64_t rows) {
    if (args.observer != nullptr && *args.observer) {
      (*args.observer)(name, layer, {data, static_cast<std::size_t>(rows * hidden)}, rows);
    }
  };

  kc::embedding_lookup(weights_.embedding.view(), shard_.vocab.begin, args.tokens.data(), n_tokens,
                       x_.data());
  all_reduce(x_.data(), n_tokens * hidden);
  observe("embed", -1, x_.data(), n_tokens);

  for (int l = 0; l < config_.num_layers; ++l) {
    if (plan.runs_attention(l)) attention_block(l, args, kv, n_tokens);
    observe("attn_out", l, x_.data(), n_tokens);
    if (plan.runs_mlp(l)) mlp_block(l, n_tokens);
    observe("mlp_out", l, x_.data(), n_tokens);
  }
  kv.extend(n_tokens);

  // Final norm and LM head for the requested rows only.
  const auto n_rows = static_cast<std::int64_t>(args.logit_rows.size());
  const Matrix& head = weights_.output_matrix();
  logits.resize(static_cast<std::size_t>(n_rows * head.rows));
  for (std::int64_t i = 0; i < n_rows; ++i) {
    const std::int64_t row = args.logit_rows[static_cast<std::size_t>(i)];
    kc::rmsnorm(x_.data() + row * hidden, weights_.final_norm.data(),
                static_cast<float>(config_.rms_norm_eps), 1, hidden, h_.data() + i * hidden);
  }
  if (n_rows > 0) {
    observe("final_norm", static_cast<int>(config_.num_layers), h_.data(), n_rows);
    kc::matmul(h_.data(), n_rows, head.view(), logits.data());
  }
  ++counters_.forwards;
  counters_.tokens += n_tokens;
  counters_.total_seconds += seconds_since(start);
}

void LlamaModel::attention_block(int layer, const ForwardArgs& args, KvCache& kv,
                                 std::int64_t n_tokens) {
  const LayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
  const std::int64_t hidden = config_.hidden_size;
  const std::int64_t hd = config_.head_dim;
  const std::int64_t q_width = q_local_ * hd;
  const std::int64_t kv_width = kv_local_ * hd;

  kc::rmsnorm(x_.data(), w.attention_norm.data(), static_cast<float>(config_.rms_norm_eps),
              n_tokens, hidden, h_.data());
  kc::matmul(h_.data(), n_tokens, w.wq.view(), q_.data());
  kc::matmul(h_.data(), n_tokens, w.wk.view(), k_.data());
  kc::matmul(h_.data(), n_tokens, w.wv.view(), v_.data());
  if (!w.bq.empty()) {
    kc::add_bias(q_.data(), w.bq.data(), n_tokens, q_width);
    kc::add_bias(k_.data(), w.bk.data(), n_tokens, kv_width);
    kc::add_bias(v_.data(), w.bv.data(), n_tokens, kv_width);
  }
  kc::apply_rope(q_.data(), n_tokens, q_width, q_local_, hd, args.positions.data(), inv_freq_);
  kc::apply_rope(k_.data(), n_tokens, kv_width, kv_local_, hd, args.positions.data(), inv_freq_);

  // Write the new K/V at slots [n_past, n_past + T) of the per-head cache.
  const std::int64_t n_past = kv.length();
  const std::int64_t capacity = kv.capacity();
  float* keys = kv.keys(layer);
  float* values = kv.values(layer);
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t h = 0; h < kv_local_; ++h) {
      const std::size_t slot = static_cast<std::size_t>((h * capacity + n_past + t) * hd);
      std::memcpy(keys + slot, k_.data() + t * kv_width + h * hd, hd * sizeof(float));
      std::memcpy(values + slot, v_.data() + t * kv_width + h * hd, hd * sizeof(float));
    }
  }

  const kc::AttentionShape shape{n_tokens, q_local_, kv_local_, hd, n_past, capacity};
  const std::uint8_t* tree = args.mask != nullptr ? args.mask->data() : nullptr;
  kc::attention(q_.data(), keys, values, shape, tree,
                static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))), attn_.data());
  kc::matmul(attn_.data(), n_tokens, w.wo.view(), o_.data());
  all_reduce(o_.data(), n_tokens * hidden);
  if (!w.bo.empty()) kc::add_bias(o_.data(), w.bo.data(), n_tokens, hidden);
  kc::add_inplace(x_.data(), o_.data(), n_tokens * hidden);
}

void LlamaModel::mlp_block(int layer, std::int64_t n_tokens) {
  const LayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
  const std::int64_t hidden = config_.hidden_size;
  kc::rmsnorm(x_.data(), w.mlp_norm.data(), static_cast<float>(config_.rms_norm_eps), n_tokens,
              hidden, h_.data());
  kc::matmul(h_.data(), n_tokens, w.w_gate.view(), gate_.data());
  kc::matmul(h_.data(), n_tokens, w.w_up.view(), up_.data());
  kc::swiglu(gate_.data(), up_.data(), gate_.data(), n_tokens * inter_local_);
  kc::matmul(gate_.data(), n_tokens, w.w_down.view(), o_.data());
  all_reduce(o_.data(), n_tokens * hidden);
  kc::add_inplace(x_.data(), o_.data(), n_tokens * hidden);
}

}  // namespace selfspec
