// --spec swift: SWIFT's on-the-fly skip-set search (§4.1: a random and Bayesian search over skip
// masks scored by matchness, eq. 3, on the tokens the target has produced), seeded from the
// sampling seed so that a run is reproducible (SwiftDrafter).
#include "draft/swift_drafter.hpp"
#include "speculative/drafter_kind.hpp"

#include <fmt/format.h>

namespace selfspec {
namespace {

// SWIFT's optimiser draws from its own stream: the sampling seed XOR this salt.
constexpr std::uint64_t kSwiftSeedSalt = 0x7377696674736b70ull;

class SwiftKind final : public DrafterKind {
 public:
  std::string_view name() const override { return "swift"; }
  std::string_view help() const override { return "SWIFT's on-the-fly skip-set search"; }

  std::vector<SettingSpec> settings() const override {
    const SwiftOptions d;
    return {{.key = "swift-ratio",
             .type = SettingType::kNumber,
             .help = "swift: share r of the 2L sublayers skipped",
             .fallback = d.skip_ratio},
            {.key = "swift-window",
             .type = SettingType::kInt,
             .help = "swift: tokens γ matchness is scored over",
             .fallback = d.window},
            {.key = "swift-bayes-every",
             .type = SettingType::kInt,
             .help = "swift: a Bayesian step every β optimisation steps (random ones between)",
             .fallback = d.bayes_every},
            {.key = "swift-max-steps",
             .type = SettingType::kInt,
             .help = "swift: most optimisation steps S",
             .fallback = d.max_steps},
            {.key = "swift-patience",
             .type = SettingType::kInt,
             .help = "swift: steps without improvement before the search stops",
             .fallback = d.patience},
            {.key = "swift-stop",
             .type = SettingType::kNumber,
             .help = "swift: the search stops once the best set's matchness reaches this",
             .fallback = d.stop_matchness},
            {.key = "swift-min-window",
             .type = SettingType::kInt,
             .help = "swift: tokens the target must have produced before the first step",
             .fallback = d.min_window}};
  }

  std::string foreign_options_message() const override {
    return "the --swift-... options need --spec swift";
  }
  std::string_view declines_others() const override {
    return " (--spec swift chooses its own skip set on the fly; --swift-ratio sets how much it "
           "skips)";
  }

  void configure(const nlohmann::json& given) override {
    swift_.skip_ratio = given.value("swift-ratio", swift_.skip_ratio);
    swift_.window = given.value("swift-window", swift_.window);
    swift_.bayes_every = given.value("swift-bayes-every", swift_.bayes_every);
    swift_.max_steps = given.value("swift-max-steps", swift_.max_steps);
    swift_.patience = given.value("swift-patience", swift_.patience);
    swift_.stop_matchness = given.value("swift-stop", swift_.stop_matchness);
    swift_.min_window = given.value("swift-min-window", swift_.min_window);
    swift_.validate();
  }

  std::unique_ptr<Drafter> make_drafter(int num_layers, std::uint64_t seed) const override {
    SwiftOptions options = swift_;
    options.seed = seed ^ kSwiftSeedSalt;
    return std::make_unique<SwiftDrafter>(num_layers, options);
  }

  std::string label() const override {
    return fmt::format("swift (r {}, window {})", swift_.skip_ratio, swift_.window);
  }

  void describe(nlohmann::json& spec, int /*num_layers*/) const override {
    spec["swift"] = {{"skip_ratio", swift_.skip_ratio},   {"window", swift_.window},
                     {"bayes_every", swift_.bayes_every}, {"max_steps", swift_.max_steps},
                     {"patience", swift_.patience},       {"stop_matchness", swift_.stop_matchness},
                     {"min_window", swift_.min_window}};
  }

 private:
  SwiftOptions swift_;
};

}  // namespace

std::unique_ptr<DrafterKind> make_swift_kind() {
  return std::make_unique<SwiftKind>();
}

}  // namespace selfspec
