// The Cali-TS acceptance predictor's file (format "selfspec-cali-predictor", written by
// scripts/train_exit_head.py --predictor): a .safetensors with F32 tensors
//   cali.step_transforms [S, d, d] (W^1..W^S), cali.weight [2d] (w_T, w_D), cali.bias [1]
// and string metadata format, version, model_identity, exit_layer, hidden_size, steps, sigma_m
// (the held-out RMS error of θ_M, σ_M) and the trainer's held-out figures.
#pragma once

#include "control/acceptance_predictor.hpp"

#include <filesystem>
#include <memory>
#include <string>

namespace selfspec {

inline constexpr const char* kCaliPredictorFormat = "selfspec-cali-predictor";

// What the predictor must fit: the model's identity (model_io/model_identity.hpp), the exit
// head's N and the hidden size.
struct PredictorTarget {
  std::string model_identity;
  int exit_layer = 0;
  std::int64_t hidden_size = 0;
};

// Throws selfspec::Error naming the file and the field or tensor when the file is malformed or
// made for another model or exit head.
std::shared_ptr<const AcceptancePredictor> load_acceptance_predictor(
    const std::filesystem::path& path, const PredictorTarget& target);

}  // namespace selfspec
