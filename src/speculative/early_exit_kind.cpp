// --spec early-exit: EESD's draft (§3.1): the model's first N layers and a trained exit head (one
// layer, the final norm and the LM head), N read from the head's file (EarlyExitDrafter). The
// head is checked against the model and loaded into it after the weights, in --exit-head-dtype:
// by default the model's load dtype, and q8_0 where the model runs native quantized weights (the
// trainer writes F32; a draft reads the head's layer every step: an F32 layer of a 1.5B model
// streams as many bytes as seven of its Q4_K layers. On Qwen2.5-Coder-1.5B Q4_K_M at N 4 the
// head in bf16 / q8_0 / q4_k gave c 0.23 / 0.19 / 0.17 with α 0.494 / 0.494 / 0.488; q8_0 keeps
// the acceptance for most of the saving and, in blocks of 32, fits any TP slice).
#include "core/error.hpp"
#include "core/weight_format.hpp"
#include "draft/early_exit_drafter.hpp"
#include "engine/engine.hpp"
#include "model/exit_head.hpp"
#include "speculative/draft_head_format.hpp"
#include "speculative/drafter_kind.hpp"

#include <fmt/format.h>

namespace selfspec {
namespace {

class EarlyExitKind final : public DrafterKind {
 public:
  std::string_view name() const override { return "early-exit"; }
  std::string_view help() const override {
    return "the first N layers and a trained exit head, --exit-head";
  }

  std::vector<SettingSpec> settings() const override {
    return {{.key = "exit-head",
             .type = SettingType::kFile,
             .help = "early-exit: the exit head file (scripts/train_exit_head.py, or a "
                     "collection's init_layer.safetensors); N is read from it"},
            {.key = "exit-head-dtype",
             .type = SettingType::kChoice,
             .help = "early-exit: the exit head's weights in memory, a dtype or a format it is "
                     "quantized to at load (auto: the model's load dtype; q8_0 under native "
                     "quantized weights)",
             .fallback = "auto",
             .choices = weight_format_choices("auto")}};
  }

  std::string foreign_options_message() const override {
    return "--exit-head and --exit-head-dtype need --spec early-exit";
  }
  std::string_view declines_others() const override {
    return " (--spec early-exit drafts with the first N layers and its exit head)";
  }

  void configure(const nlohmann::json& given) override {
    SELFSPEC_CHECK(given.contains("exit-head"),
                   "--spec early-exit and --exit-head FILE go together");
    exit_head_ = given["exit-head"].get<std::string>();
    exit_head_dtype_ = given.value("exit-head-dtype", exit_head_dtype_);
  }

  void prepare(const ModelConfig& /*config*/) override { info_ = read_exit_head_info(exit_head_); }

  void attach(Engine& engine) override {
    engine.model().attach_exit_head(
        load_exit_head(exit_head_, engine.config(), engine.model_identity(), engine.shard(),
                       draft_head_format(engine, exit_head_dtype_), engine.backend()));
  }

  int exit_layer() const override { return info_.exit_layer; }

  std::unique_ptr<Drafter> make_drafter(int num_layers, std::uint64_t /*seed*/) const override {
    return std::make_unique<EarlyExitDrafter>(num_layers, info_.exit_layer, exit_head_);
  }

  std::string label() const override { return fmt::format("early-exit (N {})", info_.exit_layer); }

  void describe(nlohmann::json& spec, int /*num_layers*/) const override {
    spec["exit_head"] = {{"file", exit_head_}, {"exit_layer", info_.exit_layer}};
    for (const char* key : {"trained_on", "heldout_top1_agreement"}) {
      if (info_.metadata.count(key) > 0) spec["exit_head"][key] = info_.metadata.at(key);
    }
  }

 private:
  std::string exit_head_;
  std::string exit_head_dtype_ = "auto";
  ExitHeadInfo info_;
};

}  // namespace

std::unique_ptr<DrafterKind> make_early_exit_kind() {
  return std::make_unique<EarlyExitKind>();
}

}  // namespace selfspec
