// --spec feature-head: a feature-level draft (EAGLE §3; beyond the seeds): a trained head reads the
// target's own final hidden states and the next token's embedding and drafts with one layer, the
// final norm and the LM head, running none of the model's layers (FeatureHeadDrafter,
// model/feature_head.hpp). The head is checked against the model and loaded into it after the
// weights, in --feature-head-dtype (auto: the model's load dtype, q8_0 under native quantized
// weights, as for exit heads).
#include "core/error.hpp"
#include "core/weight_format.hpp"
#include "draft/feature_head_drafter.hpp"
#include "engine/engine.hpp"
#include "model/feature_head.hpp"
#include "speculative/draft_head_format.hpp"
#include "speculative/drafter_kind.hpp"

#include <fmt/format.h>

namespace selfspec {
namespace {

class FeatureHeadKind final : public DrafterKind {
 public:
  std::string_view name() const override { return "feature-head"; }
  std::string_view help() const override {
    return "a trained head over the target's own last hidden states (EAGLE), --feature-head";
  }

  std::vector<SettingSpec> settings() const override {
    return {{.key = "feature-head",
             .type = SettingType::kFile,
             .help = "feature-head: the head file (scripts/train_feature_head.py)"},
            {.key = "feature-head-dtype",
             .type = SettingType::kChoice,
             .help = "feature-head: the head's weights in memory, a dtype or a format it is "
                     "quantized to at load (auto: the model's load dtype; q8_0 under native "
                     "quantized weights)",
             .fallback = "auto",
             .choices = weight_format_choices("auto")}};
  }

  std::string foreign_options_message() const override {
    return "--feature-head and --feature-head-dtype need --spec feature-head";
  }
  std::string_view declines_others() const override {
    return " (--spec feature-head drafts with its head alone, no model layer)";
  }

  void configure(const nlohmann::json& given) override {
    SELFSPEC_CHECK(given.contains("feature-head"),
                   "--spec feature-head and --feature-head FILE go together");
    head_ = given["feature-head"].get<std::string>();
    head_dtype_ = given.value("feature-head-dtype", head_dtype_);
  }

  void prepare(const ModelConfig& config) override {
    metadata_ = read_feature_head_metadata(head_);
    hidden_size_ = config.hidden_size;
  }

  void attach(Engine& engine) override {
    engine.model().attach_feature_head(
        load_feature_head(head_, engine.config(), engine.model_identity(), engine.shard(),
                          draft_head_format(engine, head_dtype_), engine.backend()));
  }

  std::unique_ptr<Drafter> make_drafter(int num_layers, std::uint64_t /*seed*/) const override {
    return std::make_unique<FeatureHeadDrafter>(num_layers, hidden_size_, head_);
  }

  std::string label() const override { return "feature-head"; }

  void describe(nlohmann::json& spec, int /*num_layers*/) const override {
    spec["feature_head"] = {{"file", head_}};
    for (const char* key :
         {"trained_on", "heldout_depth1_agreement", "heldout_depth2_agreement_given_depth1"}) {
      if (metadata_.count(key) > 0) spec["feature_head"][key] = metadata_.at(key);
    }
  }

 private:
  std::string head_;
  std::string head_dtype_ = "auto";
  std::map<std::string, std::string> metadata_;
  std::int64_t hidden_size_ = 0;
};

}  // namespace

std::unique_ptr<DrafterKind> make_feature_head_kind() {
  return std::make_unique<FeatureHeadKind>();
}

}  // namespace selfspec
