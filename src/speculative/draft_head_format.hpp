// The weight format a trained draft head (an exit head, a feature head) is held in, from its
// --*-head-dtype setting: a dtype or a format it is quantized to at load, or "auto" — the model's
// load dtype, and q8_0 where the model runs native quantized weights (the trainers write F32; a
// draft reads its head every step, and an F32 layer of a 1.5B model streams as many bytes as
// seven of its Q4_K layers).
#pragma once

#include "core/weight_format.hpp"

#include <optional>
#include <string_view>

namespace selfspec {

class Engine;

std::optional<WeightFormat> draft_head_format(const Engine& engine, std::string_view setting);

}  // namespace selfspec
