// --spec asd: Draft on the Fly's skip set per prompt (§3, Alg. 1): the prompt's prefill measures
// each attention sublayer's input/output cosine similarity, and the sublayers at or above α are
// skipped, with every m-th layer and never the last n (CosineSkipDrafter).
#include "draft/adaptive_draft_model.hpp"
#include "draft/cosine_skip_drafter.hpp"
#include "model_io/model_config.hpp"
#include "speculative/drafter_kind.hpp"

#include <fmt/format.h>

namespace selfspec {
namespace {

class AsdKind final : public DrafterKind {
 public:
  std::string_view name() const override { return "asd"; }
  std::string_view help() const override {
    return "Draft on the Fly: a skip set per prompt from its cosine similarities";
  }

  std::vector<SettingSpec> settings() const override {
    const AsdParams d;
    return {{.key = "asd-alpha",
             .type = SettingType::kNumber,
             .help = "asd: skip attention sublayers whose average input/output cosine over the "
                     "prompt is >= alpha, in (0, 1)",
             .fallback = d.alpha,
             .min = 0.0,
             .max = 1.0,
             .min_open = true,
             .max_open = true},
            {.key = "asd-m",
             .type = SettingType::kInt,
             .help = "asd: also skip every m-th layer (1-based), m >= 1",
             .fallback = d.m,
             .min = 1},
            {.key = "asd-n",
             .type = SettingType::kInt,
             .help = "asd: never skip the last n layers, n >= 0",
             .fallback = d.n,
             .min = 0}};
  }

  std::string foreign_options_message() const override {
    return "--asd-alpha/--asd-m/--asd-n need --spec asd";
  }
  std::string_view declines_others() const override {
    return " (--spec asd chooses its skip set per prompt)";
  }

  void configure(const nlohmann::json& given) override {
    asd_.alpha = given.value("asd-alpha", asd_.alpha);
    asd_.m = given.value("asd-m", asd_.m);
    asd_.n = given.value("asd-n", asd_.n);
    asd_.validate();
  }

  void prepare(const ModelConfig& config) override {
    asd_.validate(static_cast<int>(config.num_layers));
  }

  std::unique_ptr<Drafter> make_drafter(int num_layers, std::uint64_t /*seed*/) const override {
    return std::make_unique<CosineSkipDrafter>(num_layers, asd_);
  }

  std::string label() const override {
    return fmt::format("asd (alpha {}, m {}, n {})", asd_.alpha, asd_.m, asd_.n);
  }

  void describe(nlohmann::json& spec, int /*num_layers*/) const override {
    spec["asd"] = {{"alpha", asd_.alpha}, {"m", asd_.m}, {"n", asd_.n}};
  }

 private:
  AsdParams asd_;  // Table 2's defaults
};

}  // namespace

std::unique_ptr<DrafterKind> make_asd_kind() {
  return std::make_unique<AsdKind>();
}

}  // namespace selfspec
