// Adding a drafter kind is one file and one registry line: a toy kind ("--spec every-other":
// skip the MLP of every other layer, with a setting of its own) written here as a product kind
// would be, registered beside the built-in ones, given as JSON settings, and run through
// SpeculativeSetup like every other kind: its drafter's greedy output equals plain decoding, its
// setting is refused without its --spec, and the built-in kinds still refuse theirs with it.
#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "decode/decoder.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "engine/engine.hpp"
#include "model_io/model_config.hpp"
#include "speculative/speculative_setup.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_models.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace selfspec::testing {
namespace {

// The whole of a new kind: its option, its check, its drafter, its name in reports.
class EveryOtherKind final : public DrafterKind {
 public:
  std::string_view name() const override { return "every-other"; }
  std::string_view help() const override { return "skip the MLP of every other layer"; }
  std::vector<SettingSpec> settings() const override {
    return {{.key = "every-other-first",
             .type = SettingType::kInt,
             .help = "the first layer whose MLP is skipped",
             .fallback = 1,
             .min = 0}};
  }
  std::string foreign_options_message() const override {
    return "--every-other-first needs --spec every-other";
  }
  void configure(const nlohmann::json& given) override {
    first_ = given.value("every-other-first", first_);
  }
  void prepare(const ModelConfig& config) override {
    SELFSPEC_CHECK(first_ >= 0 && first_ < config.num_layers,
                   "--every-other-first must be a layer in [0, {})", config.num_layers);
  }
  std::unique_ptr<Drafter> make_drafter(int num_layers, std::uint64_t /*seed*/) const override {
    LayerPlan plan = LayerPlan::full(num_layers);
    for (int layer = first_; layer < num_layers; layer += 2) plan.set_mlp(layer, false);
    return std::make_unique<LayerSkipDrafter>(plan, label());
  }
  std::string label() const override { return fmt::format("every-other (from {})", first_); }
  void describe(nlohmann::json& spec, int /*num_layers*/) const override {
    spec["every_other_first"] = first_;
  }

 private:
  int first_ = 1;
};

class ToyDrafterKind : public ::testing::Test {
 protected:
  ToyDrafterKind() {
    write_tiny_checkpoint(speculative_tiny_spec(4), dir_.path());
    engine_ = std::make_unique<Engine>(engine_options(), comm_);
    kinds_.drafters.add([] { return std::make_unique<EveryOtherKind>(); });  // the registry line
  }

  // The setup of `settings` (JSON, as a request would give them); throws what the config or the
  // setup throws.
  std::unique_ptr<SpeculativeSetup> setup(const nlohmann::json& settings) {
    return std::make_unique<SpeculativeSetup>(
        speculative_config(settings, SettingSource::kJson, kinds_), *engine_, kinds_);
  }

  EngineOptions engine_options() const {
    EngineOptions options;
    options.source.model_path = dir_.path();
    options.device = "cpu";
    return options;
  }

  TempDir dir_{"selfspec-toy-kind"};
  LocalComm comm_;
  SpeculativeKinds kinds_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(ToyDrafterKind, DraftsLosslesslyThroughTheSetup) {
  const auto spec = setup({{"spec", "every-other"},
                           {"every_other_first", 0},
                           {"controller", "fixed"},
                           {"max_draft", 3}});
  engine_->load();
  spec->attach(*engine_);
  EXPECT_EQ(spec->label(), "every-other (from 0)");
  EXPECT_EQ(spec->describe()["every_other_first"], 0);
  EXPECT_EQ(spec->describe()["drafter"], "every-other");

  GenerationOptions generation;
  generation.max_new_tokens = 24;
  generation.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {3, 14, 15, 9, 2};
  KvCache plain_kv = engine_->model().make_kv_cache(64);
  const GenerationResult plain =
      Decoder(engine_->model(), engine_->comm()).generate(prompt, generation, plain_kv);
  const std::unique_ptr<Drafter> drafter = spec->make_drafter(0);
  const std::unique_ptr<DraftLengthController> controller = spec->make_controller("fixed", 0);
  KvCache kv = engine_->model().make_kv_cache(64);
  const GenerationResult drafted = Decoder(engine_->model(), engine_->comm(), *drafter, *controller)
                                       .generate(prompt, spec->generation(generation, nullptr), kv);
  EXPECT_EQ(drafted.tokens, plain.tokens);
  EXPECT_GT(drafted.stats.draft_forwards, 0);
}

TEST_F(ToyDrafterKind, OptionsAreCheckedAsTheBuiltInKindsAre) {
  const auto error_of = [&](const nlohmann::json& settings) -> std::string {
    try {
      setup(settings);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(error_of({{"spec", "layer-skip"}, {"skip-uniform", 0.3}, {"every-other-first", 1}}),
              ::testing::HasSubstr("--every-other-first needs --spec every-other"));
  EXPECT_THAT(error_of({{"spec", "every-other"}, {"asd-alpha", 0.9}}),
              ::testing::HasSubstr("--asd-alpha/--asd-m/--asd-n need --spec asd"));
  EXPECT_THAT(error_of({{"spec", "every-other"}, {"every-other-first", 9}}),
              ::testing::HasSubstr("--every-other-first must be a layer in [0, 4)"));
  EXPECT_THAT(error_of({{"spec", "every-other"}, {"every-other-first", -1}}),
              ::testing::HasSubstr("\"every-other-first\" must be an integer >= 0 (got -1)"));
  EXPECT_EQ(error_of({{"spec", "every-other"}}), "");
}

TEST(DrafterKinds, ANameIsRegisteredOnce) {
  DrafterKinds kinds = builtin_drafter_kinds();
  EXPECT_THAT(kinds.choices(), ::testing::ElementsAre("none", "layer-skip", "swift", "asd",
                                                      "early-exit", "feature-head", "lookup"));
  const auto every_other = [] { return std::make_unique<EveryOtherKind>(); };
  kinds.add(every_other);
  EXPECT_THROW(kinds.add(every_other), Error);
  EXPECT_THROW(kinds.make("every-others"), Error);
}

}  // namespace
}  // namespace selfspec::testing
