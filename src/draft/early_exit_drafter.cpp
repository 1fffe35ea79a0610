#include "draft/early_exit_drafter.hpp"

#include "core/error.hpp"

namespace selfspec {

EarlyExitDrafter::EarlyExitDrafter(int num_layers, int exit_layer, std::string head)
    : plan_(LayerPlan::full(num_layers)), exit_layer_(exit_layer), head_(std::move(head)) {
  SELFSPEC_CHECK(exit_layer >= 1 && exit_layer < num_layers,
                 "early-exit drafting after {} layers: choose 1 to {} (the model has {})",
                 exit_layer, num_layers - 1, num_layers);
}

nlohmann::json EarlyExitDrafter::state() const {
  return {{"exit_layer", exit_layer_}, {"exit_head", head_}};
}

}  // namespace selfspec
