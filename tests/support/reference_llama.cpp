#include "tests/support/reference_llama.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>

namespace selfspec::testing {
namespace {

using Vec = std::vector<double>;

// x rounded to bf16 (through f32, round-to-nearest-even; subnormals read as zero), as the
// engine's bf16 matmuls round their activations.
Vec round_to_bf16(const Vec& x) {
  Vec out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto f = static_cast<float>(x[i]);
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    float rounded;
    std::memcpy(&rounded, &bits, sizeof rounded);
    out[i] = std::fabs(rounded) < std::numeric_limits<float>::min() ? 0.0 : rounded;
  }
  return out;
}

// y = W x for W [rows × cols] row-major (x rounded to bf16 first when `bf16_inputs`).
Vec matvec(const Vec& w, const Vec& x_in, std::size_t rows, std::size_t cols,
           bool bf16_inputs = false) {
  const Vec x = bf16_inputs ? round_to_bf16(x_in) : x_in;
  Vec y(rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (std::size_t c = 0; c < cols; ++c) sum += w[r * cols + c] * x[c];
    y[r] = sum;
  }
  return y;
}

Vec rms_norm(const Vec& x, const Vec& weight, double eps) {
  double mean_square = 0.0;
  for (double v : x) mean_square += v * v;
  mean_square /= static_cast<double>(x.size());
  const double scale = 1.0 / std::sqrt(mean_square + eps);
  Vec y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = weight[i] * (x[i] * scale);
  return y;
}

// HF _compute_default_rope_parameters / _compute_linear_scaling_rope_parameters /
// _compute_llama3_parameters, in double.
Vec inverse_frequencies(const ModelConfig& c) {
  const auto d = static_cast<std::size_t>(c.head_dim);
  Vec inv(d / 2);
  for (std::size_t i = 0; i < d / 2; ++i) {
    inv[i] = std::pow(c.rope_theta, -static_cast<double>(2 * i) / static_cast<double>(d));
  }
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScalingType::kLinear) {
    for (double& f : inv) f /= s.factor;
  } else if (s.type == RopeScalingType::kLlama3) {
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double low_wavelen = old_len / s.low_freq_factor;
    const double high_wavelen = old_len / s.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      const double scaled = wavelen > low_wavelen ? f / s.factor : f;
      const double smooth =
          (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      const double smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : scaled;
    }
  }
  return inv;
}

// head <- head * cos + rotate_half(head) * sin, cos/sin = cat(freqs, freqs) at `position`.
void rotate(double* head, std::size_t d, const Vec& inv, std::size_t position) {
  Vec rotated(d);
  for (std::size_t i = 0; i < d; ++i) {
    const double angle = static_cast<double>(position) * inv[i % (d / 2)];
    const double rotate_half = i < d / 2 ? -head[i + d / 2] : head[i - d / 2];
    rotated[i] = head[i] * std::cos(angle) + rotate_half * std::sin(angle);
  }
  std::copy(rotated.begin(), rotated.end(), head);
}

bool contains(const std::vector<int>& list, std::size_t layer) {
  return std::find(list.begin(), list.end(), static_cast<int>(layer)) != list.end();
}

}  // namespace

std::vector<std::vector<double>> reference_forward(const ReferenceWeights& w,
                                                   const std::vector<std::int32_t>& tokens,
                                                   const ReferenceSkips& skips,
                                                   const ReferenceResidualObserver& observe) {
  const auto H = static_cast<std::size_t>(w.config.hidden_size);
  std::vector<Vec> x(tokens.size());
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const auto row = static_cast<std::size_t>(tokens[t]) * H;
    x[t].assign(w.embedding.begin() + static_cast<std::ptrdiff_t>(row),
                w.embedding.begin() + static_cast<std::ptrdiff_t>(row + H));
  }
  return reference_forward_rows(w, std::move(x), skips, observe);
}

std::vector<std::vector<double>> reference_forward_rows(const ReferenceWeights& w,
                                                        std::vector<std::vector<double>> x,
                                                        const ReferenceSkips& skips,
                                                        const ReferenceResidualObserver& observe) {
  const ModelConfig& c = w.config;
  const bool bf16 = w.bf16_activations;
  const std::size_t T = x.size();
  const auto H = static_cast<std::size_t>(c.hidden_size);
  const auto d = static_cast<std::size_t>(c.head_dim);
  const auto hq = static_cast<std::size_t>(c.num_heads);
  const auto hkv = static_cast<std::size_t>(c.num_kv_heads);
  const auto inter = static_cast<std::size_t>(c.intermediate_size);
  const Vec inv = inverse_frequencies(c);

  for (std::size_t l = 0; l < static_cast<std::size_t>(c.num_layers); ++l) {
    const ReferenceLayer& L = w.layers[l];
    if (observe) observe(static_cast<int>(l), false, x);
    if (!contains(skips.attention, l)) {
      std::vector<Vec> q(T), k(T), v(T);
      for (std::size_t t = 0; t < T; ++t) {
        const Vec h = rms_norm(x[t], L.attention_norm, c.rms_norm_eps);
        q[t] = matvec(L.wq, h, hq * d, H, bf16);
        k[t] = matvec(L.wk, h, hkv * d, H, bf16);
        v[t] = matvec(L.wv, h, hkv * d, H, bf16);
        if (c.attention_bias) {
          for (std::size_t i = 0; i < hq * d; ++i) q[t][i] += L.bq[i];
          for (std::size_t i = 0; i < hkv * d; ++i) k[t][i] += L.bk[i];
          for (std::size_t i = 0; i < hkv * d; ++i) v[t][i] += L.bv[i];
        }
        for (std::size_t head = 0; head < hq; ++head) rotate(q[t].data() + head * d, d, inv, t);
        for (std::size_t head = 0; head < hkv; ++head) rotate(k[t].data() + head * d, d, inv, t);
      }
      const std::size_t group = hq / hkv;  // repeat_kv: query head h uses KV head h / group
      for (std::size_t t = 0; t < T; ++t) {
        Vec attn(hq * d, 0.0);
        for (std::size_t head = 0; head < hq; ++head) {
          const std::size_t kv_head = head / group;
          Vec scores(t + 1);
          double max_score = -std::numeric_limits<double>::infinity();
          for (std::size_t j = 0; j <= t; ++j) {
            double s = 0.0;
            for (std::size_t e = 0; e < d; ++e) s += q[t][head * d + e] * k[j][kv_head * d + e];
            scores[j] = s / std::sqrt(static_cast<double>(d));
            max_score = std::max(max_score, scores[j]);
          }
          double denominator = 0.0;
          for (double& s : scores) {
            s = std::exp(s - max_score);
            denominator += s;
          }
          for (std::size_t j = 0; j <= t; ++j) {
            for (std::size_t e = 0; e < d; ++e) {
              attn[head * d + e] += scores[j] / denominator * v[j][kv_head * d + e];
            }
          }
        }
        const Vec o = matvec(L.wo, attn, H, hq * d, bf16);
        for (std::size_t i = 0; i < H; ++i) x[t][i] += o[i] + (L.bo.empty() ? 0.0 : L.bo[i]);
      }
    }
    if (observe) observe(static_cast<int>(l), true, x);
    if (!contains(skips.mlp, l)) {
      for (std::size_t t = 0; t < T; ++t) {
        const Vec h = rms_norm(x[t], L.mlp_norm, c.rms_norm_eps);
        const Vec g = matvec(L.w_gate, h, inter, H, bf16);
        const Vec u = matvec(L.w_up, h, inter, H, bf16);
        Vec a(inter);
        for (std::size_t i = 0; i < inter; ++i) a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        const Vec down = matvec(L.w_down, a, H, inter, bf16);
        for (std::size_t i = 0; i < H; ++i) x[t][i] += down[i];
      }
    }
  }
  if (observe) observe(static_cast<int>(w.layers.size()), false, x);  // the final residual
  std::vector<Vec> logits(T);
  for (std::size_t t = 0; t < T; ++t) {
    const Vec h = rms_norm(x[t], w.final_norm, c.rms_norm_eps);
    logits[t] = matvec(w.lm_head, h, static_cast<std::size_t>(c.vocab_size), H, bf16);
  }
  return logits;
}

std::vector<std::int32_t> reference_greedy(const ReferenceWeights& weights,
                                           const std::vector<std::int32_t>& prompt, int n,
                                           const ReferenceSkips& skips) {
  std::vector<std::int32_t> sequence = prompt;
  std::vector<std::int32_t> generated;
  for (int i = 0; i < n; ++i) {
    const std::vector<Vec> logits = reference_forward(weights, sequence, skips);
    const Vec& last = logits.back();
    const auto best =
        static_cast<std::int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    generated.push_back(best);
    sequence.push_back(best);
  }
  return generated;
}

}  // namespace selfspec::testing
