// Training data for Cali-TS's acceptance predictor (EESD §3.3, eq. 5; format "selfspec-cali-data",
// docs/ARCHITECTURE.md): one row per drafted token, recorded on rank 0 during early-exit drafting.
// A row holds the target's final hidden state at the round's root, the draft's at the token, the
// token's draft step i (1-based) and whether verification accepted it. Rows stop at a round's
// first rejected token: the tokens after it were drafted from a wrong prefix.
//
// CaliDataRecorder is a draft-length controller that wraps another (the one that decides) and
// records what it sees: the engine feeds it hidden states like any controller that asks for them.
#pragma once

#include "control/draft_length_controller.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

namespace selfspec::launch {

inline constexpr const char* kCaliDataFormat = "selfspec-cali-data";
inline constexpr int kCaliDataVersion = 1;

struct CaliRows {
  std::int64_t hidden_size = 0;
  std::vector<std::uint16_t> target_hidden;  // BF16 bits, [R × hidden_size]
  std::vector<std::uint16_t> draft_hidden;   // BF16 bits, [R × hidden_size]
  std::vector<float> step, accepted, sequence;

  std::int64_t rows() const { return static_cast<std::int64_t>(step.size()); }
  std::int64_t accepted_rows() const;
  void clear();
};

// Writes the rows as one .safetensors shard (tensors target_hidden, draft_hidden BF16 [R, d];
// step, accepted, sequence F32 [R]), atomically.
void write_cali_shard(const CaliRows& rows, const std::filesystem::path& path);

class CaliDataRecorder final : public DraftLengthController {
 public:
  // `decider` chooses the draft lengths; rows go to `rows` (rank 0's), tagged with sequence().
  CaliDataRecorder(std::unique_ptr<DraftLengthController> decider, CaliRows& rows);

  void set_sequence(std::int64_t sequence) { sequence_ = sequence; }
  std::int64_t rounds() const { return rounds_; }

  std::string_view name() const override { return decider_->name(); }
  int max_draft() const override { return decider_->max_draft(); }
  void begin_round() override;
  bool uses_hidden_states() const override { return true; }
  void observe_hidden(int drafted, std::span<const float> target_root,
                      std::span<const float> draft_token) override;
  bool continue_drafting(int drafted, double confidence) override;
  void update(int drafted, int accepted) override;
  nlohmann::json state() const override { return decider_->state(); }

 private:
  std::unique_ptr<DraftLengthController> decider_;
  CaliRows& rows_;
  std::int64_t sequence_ = 0;
  std::int64_t rounds_ = 0;
  std::vector<float> target_root_;                // this round's
  std::vector<std::vector<float>> draft_hidden_;  // this round's, by draft step
};

}  // namespace selfspec::launch
