// --spec layer-skip: one fixed skip set for every prompt (Draft & Verify §3.1: the draft is the
// model with the sublayers of a skip set bypassed), given as a file, as lists or as SWIFT's
// uniform start; the draft's plan is the set's LayerPlan (LayerSkipDrafter).
#include "core/error.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "draft/skip_set.hpp"
#include "model_io/model_config.hpp"
#include "speculative/drafter_kind.hpp"

#include <optional>

namespace selfspec {
namespace {

class LayerSkipKind final : public DrafterKind {
 public:
  std::string_view name() const override { return "layer-skip"; }
  std::string_view help() const override { return "a fixed skip set"; }

  std::vector<SettingSpec> settings() const override {
    return {{.key = "skip-config",
             .type = SettingType::kFile,
             .help = "skip set file (YAML/JSON {attention: [...], mlp: [...]}, configs/skips/)"},
            {.key = "skip-attn",
             .type = SettingType::kIntList,
             .help = "attention sublayers to skip, e.g. 3,5,9",
             .min = 0},
            {.key = "skip-mlp",
             .type = SettingType::kIntList,
             .help = "MLP sublayers to skip, e.g. 6,10",
             .min = 0},
            {.key = "skip-uniform",
             .type = SettingType::kNumber,
             .help = "skip this fraction of the 2L sublayers, spread uniformly (SWIFT's start)",
             .min = 0.0,
             .max = 0.99}};
  }

  std::string foreign_options_message() const override {
    return "--skip-config/--skip-attn/--skip-mlp/--skip-uniform need --spec layer-skip";
  }

  void configure(const nlohmann::json& given) override {
    const bool file = given.contains("skip-config");
    const bool lists = given.contains("skip-attn") || given.contains("skip-mlp");
    const bool uniform = given.contains("skip-uniform");
    SELFSPEC_CHECK(
        static_cast<int>(file) + static_cast<int>(lists) + static_cast<int>(uniform) == 1,
        "--spec layer-skip needs exactly one skip set: --skip-config FILE, or "
        "--skip-attn/--skip-mlp LISTS, or --skip-uniform R");
    given_ = given;
  }

  void prepare(const ModelConfig& config) override {
    const int num_layers = static_cast<int>(config.num_layers);
    SkipSet skips;
    if (given_.contains("skip-config")) {
      skips = load_skip_set(given_["skip-config"].get<std::string>());
    } else if (given_.contains("skip-uniform")) {
      skips = uniform_skip_set(num_layers, given_["skip-uniform"].get<double>());
    } else {
      skips.name = "cli";
      skips.source = "--skip-attn/--skip-mlp";
      skips.attention = given_.value("skip-attn", std::vector<int>{});
      skips.mlp = given_.value("skip-mlp", std::vector<int>{});
    }
    skips.plan(num_layers);  // range check against this model, naming the set and index
    skips_ = std::move(skips);
  }

  std::unique_ptr<Drafter> make_drafter(int num_layers, std::uint64_t /*seed*/) const override {
    return std::make_unique<LayerSkipDrafter>(chosen().plan(num_layers), chosen().name);
  }

  std::string label() const override { return chosen().name; }

  void describe(nlohmann::json& spec, int num_layers) const override {
    const LayerPlan plan = chosen().plan(num_layers);
    spec["skip_set"] = nlohmann::json::parse(chosen().describe());
    spec["skipped_sublayers"] = plan.skipped_count();
    spec["skip_fraction"] = static_cast<double>(plan.skipped_count()) / (2.0 * num_layers);
  }

  const SkipSet* skip_set() const override { return &chosen(); }

  DraftVocabRanking draft_vocab_ranking() const override {
    if (chosen().draft_vocab.empty()) return {};
    return {chosen().draft_vocab, "the draft_vocab of skip set '" + chosen().name + "'"};
  }

 private:
  const SkipSet& chosen() const {
    SELFSPEC_CHECK(skips_.has_value(), "--spec layer-skip: the skip set is not prepared yet");
    return *skips_;
  }

  nlohmann::json given_ = nlohmann::json::object();
  std::optional<SkipSet> skips_;
};

}  // namespace

std::unique_ptr<DrafterKind> make_layer_skip_kind() {
  return std::make_unique<LayerSkipKind>();
}

}  // namespace selfspec
