// What a round's draft forwards run, as one value: the layer plan (which sublayers they skip) and,
// for an early-exit draft (EESD §3.1), the exit layer N — the forwards then run layers [0, N)
// under the plan, then the model's attached exit head. Rank 0's drafter decides it
// (Drafter::next_plan) and it travels to every rank in the control message (skip mask + exit
// layer).
#pragma once

#include "model/layer_plan.hpp"

namespace selfspec {

struct DraftPlan {
  LayerPlan layers;
  int exit_layer = -1;  // N, or -1: no early exit

  bool exits_early() const { return exit_layer >= 0; }
  bool operator==(const DraftPlan& other) const = default;
};

}  // namespace selfspec
