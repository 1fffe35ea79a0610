// Draft-length controllers: rank 0 asks one, after every drafted token, whether to draft another,
// and tells it, after every verification, how many drafted tokens were accepted. One interface,
// one implementation per file (all rank-0 only; their decisions travel in ControlMessages):
//   fixed      — always K tokens (the classic speculative decoding baseline);
//   threshold  — stop when the draft's top probability < γ (Draft & Verify §3.4, static γ);
//   adaptive   — Draft & Verify's adaptive draft-exiting threshold (§3.4, eqs. 2–4; Table 7);
//   thompson   — EESD's Beta–Thompson-sampling control (§3.3, App. A, Alg. 2);
//   cali-ts    — EESD's calibrated Thompson sampling (§3.3, App. B, Alg. 3): a prediction head
//                over hidden states mixed with the observed acceptance.
// Every controller also respects the hard cap max_draft (the papers' K). Any controller works with
// any drafter: they see counts and the draft confidence; cali-ts also the final hidden states.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace selfspec {

class AcceptancePredictor;
class ControllerKinds;

// The one draft limit: at most this many tokens drafted per round (the papers' K). A control
// message carries 64 tokens: the drafts and the target's own token (decode/control_message.hpp).
inline constexpr int kMaxDraftTokens = 63;

class DraftLengthController {
 public:
  virtual ~DraftLengthController() = default;
  virtual std::string_view name() const = 0;

  // The hard cap on tokens drafted per round (>= 1).
  virtual int max_draft() const = 0;

  // Called once before each drafting round.
  virtual void begin_round() {}

  // Controllers that predict from hidden states return true; the run then calls observe_hidden
  // after every draft forward (before continue_drafting, and also at the cap, where that is not
  // asked) with the target's final hidden state at the round's root — the final norm's output at
  // the position whose logits gave the last verified token — and the draft's at the token just
  // drafted, `drafted` (1-based) of the round. Both full width (hidden_size), rank 0 only.
  virtual bool uses_hidden_states() const { return false; }
  virtual void observe_hidden(int /*drafted*/, std::span<const float> /*target_root*/,
                              std::span<const float> /*draft_token*/) {}

  // After the draft model produced its `drafted`-th token of the current round (1-based), whose
  // probability under the draft distribution — the draft's top probability — is `confidence`:
  // true to draft one more. The caller stops anyway at max_draft() (or when the generation budget
  // is exhausted) and then does not ask.
  virtual bool continue_drafting(int drafted, double confidence) = 0;

  // After verification of a round in which `drafted` tokens (>= 1) were proposed and the first
  // `accepted` (0..drafted) of them were accepted. (The verification always yields one token of
  // the target's own besides: the correction, or the bonus token when all were accepted.)
  virtual void update(int drafted, int accepted) = 0;

  // The controller's state for per-step traces, e.g. {"gamma": 0.61, "ar": 0.82} or
  // {"alpha": 12.0, "beta": 3.0}.
  virtual nlohmann::json state() const = 0;
};

// Every controller's options; each uses its own subset, declared with its ranges in its kind
// (control/controller_kind.hpp, in the controller's file). Defaults from the papers:
// Draft & Verify Table 7 (K = 12, γ0 = 0.6, ε = 0.01, β1 = 0.5, β2 = 0.9, α = 0.85 — Table 7's
// most common target; 0.90 for LLaMA-2-13B on CNN/DM, 0.70–0.90 elsewhere); EESD gives no prior
// values, so the Beta prior defaults to the uniform Beta(1, 1), and Cali-TS's σ_S and θ̂_0 to
// 0.25 and 0.5 (calibrated_thompson_controller.cpp says why).
struct ControllerOptions {
  std::string kind = "adaptive";  // a registered kind (control/controller_kinds.cpp)
  int max_draft = 12;             // K, in [1, kMaxDraftTokens]
  double threshold = 0.6;         // γ of the static threshold controller
  // adaptive threshold (Draft & Verify eqs. 2–4)
  double gamma0 = 0.6;
  double epsilon = 0.01;
  double beta1 = 0.5;
  double beta2 = 0.9;
  double target_acceptance = 0.85;  // α
  // Beta–Thompson sampling (EESD Alg. 2)
  double prior_alpha = 1.0;
  double prior_beta = 1.0;
  // Calibrated Thompson sampling (EESD Alg. 3, eqs. 5–10)
  std::shared_ptr<const AcceptancePredictor> predictor;  // the head of eq. 5 (needed by cali-ts)
  double sigma_m = -1.0;  // σ_M; < 0: the predictor's held-out error
  double sigma_s = 0.25;  // σ_S
  double theta0 = 0.5;    // θ̂_0
  std::uint64_t seed = 0;
  // The settings of a kind that keeps its own (ControllerKind::read's default), e.g. a kind
  // added outside the built-in registry.
  nlohmann::json params = nlohmann::json::object();

  // Throws selfspec::Error naming the option, its range and the value when max_draft or a
  // built-in kind's setting is out of the range its kind declares.
  void validate() const;
};

// The controller of kind options.kind among `kinds` (default: the built-in ones). Throws
// selfspec::Error for an unknown kind (listing the known ones) or an invalid option.
std::unique_ptr<DraftLengthController> make_draft_length_controller(
    const ControllerOptions& options);
std::unique_ptr<DraftLengthController> make_draft_length_controller(
    const ControllerOptions& options, const ControllerKinds& kinds);

}  // namespace selfspec
