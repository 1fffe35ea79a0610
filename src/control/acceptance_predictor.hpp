// EESD's acceptance prediction head (Liu et al., 2024, §3.3, eq. 5): the model's estimate θ_M of
// the probability that drafting should go on, from the target's last-layer hidden state at the
// round's root (H_t^(T)) and the draft's at the token just drafted (H_{t+i}^(D)):
//
//   θ_M^{t+i} = sigmoid(W_p [W^i H_t^(T), H_{t+i}^(D)]),   i = min(i, S), S = 10 in the paper.
//
// Our reading: W_p is one row w = [w_T, w_D] (2d) plus a bias b — a 2-way softmax over
// {stop, go on}, as the paper's W_p ∈ R^{2×2d} with cross-entropy gives, is one logistic output.
// Since w_T · (W^i h) = (W^iᵀ w_T) · h, the S matrices fold into S vectors u_i = W^iᵀ w_T at
// construction, so a prediction costs two dot products of length d (not a d × d product).
// Hidden states are the final RMSNorm's output (the LM head's input), full width on every rank.
// The head is trained by scripts/train_exit_head.py --predictor on data from collect-cali-data.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace selfspec {

struct AcceptancePredictorWeights {
  std::int64_t hidden_size = 0;        // d
  int steps = 0;                       // S
  std::vector<float> step_transforms;  // W^1..W^S: [S × d × d], (W^i h)_r = Σ_c W[i-1][r][c] h_c
  std::vector<float> weight;           // w: [2d], w_T then w_D
  float bias = 0.0F;                   // b
  double sigma_m = 0.0;                // held-out RMS error of θ_M (σ_M of eqs. 6–7)
};

class AcceptancePredictor {
 public:
  // Throws selfspec::Error when the sizes disagree with hidden_size and steps.
  explicit AcceptancePredictor(const AcceptancePredictorWeights& weights);

  std::int64_t hidden_size() const { return hidden_size_; }
  int steps() const { return steps_; }
  double sigma_m() const { return sigma_m_; }

  // θ_M for draft step `step` (1-based; clamped to S) from the two hidden states (length d).
  double predict(int step, std::span<const float> target_root,
                 std::span<const float> draft_token) const;

 private:
  std::int64_t hidden_size_;
  int steps_;
  std::vector<double> folded_;  // u_1..u_S: [S × d]
  std::vector<double> draft_weight_;
  double bias_;
  double sigma_m_;
};

}  // namespace selfspec
