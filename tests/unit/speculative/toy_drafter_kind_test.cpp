// Adding a drafter kind is one file and one registry line: a toy kind ("--spec every-other":
// skip the MLP of every other layer, with an option of its own) written here as a product kind
// would be, registered beside the built-in ones, parsed from a command line, and run through
// SpeculativeSetup like every other kind: its drafter's greedy output equals plain decoding, its
// option is refused without its --spec, and the built-in kinds still refuse theirs with it.
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
  void add_options(CLI::App& group, bool /*lists*/) override {
    group.add_option("--every-other-first", first_, "the first layer whose MLP is skipped");
  }
  std::string foreign_options_message() const override {
    return "--every-other-first needs --spec every-other";
  }
  void prepare(const CLI::App& /*command*/, const ModelConfig& config) override {
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
    kinds_.add(std::make_unique<EveryOtherKind>());  // the registry line
  }

  // Parses `arguments` as a command with the self-speculative options; throws what parsing or the
  // setup throws.
  std::unique_ptr<SpeculativeSetup> setup(SpeculativeOptions& options, CLI::App& command,
                                          const std::vector<std::string>& arguments) {
    options.add_to(command);
    command.parse(std::vector<std::string>(arguments.rbegin(), arguments.rend()));
    return std::make_unique<SpeculativeSetup>(options, command, *engine_);
  }

  EngineOptions engine_options() const {
    EngineOptions options;
    options.source.model_path = dir_.path();
    options.device = "cpu";
    return options;
  }

  TempDir dir_{"selfspec-toy-kind"};
  LocalComm comm_;
  DrafterKinds kinds_ = builtin_drafter_kinds();
  std::unique_ptr<Engine> engine_;
};

TEST_F(ToyDrafterKind, DraftsLosslesslyThroughTheSetup) {
  SpeculativeOptions options(std::move(kinds_));
  CLI::App command;
  const auto spec = setup(options, command,
                          {"--spec", "every-other", "--every-other-first", "0", "--controller",
                           "fixed", "--max-draft", "3"});
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
  const auto error_of = [&](const std::vector<std::string>& arguments) -> std::string {
    SpeculativeOptions options(std::move(kinds_));
    kinds_ = builtin_drafter_kinds();
    kinds_.add(std::make_unique<EveryOtherKind>());
    CLI::App command;
    try {
      setup(options, command, arguments);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(
      error_of({"--spec", "layer-skip", "--skip-uniform", "0.3", "--every-other-first", "1"}),
      ::testing::HasSubstr("--every-other-first needs --spec every-other"));
  EXPECT_THAT(error_of({"--spec", "every-other", "--asd-alpha", "0.9"}),
              ::testing::HasSubstr("--asd-alpha/--asd-m/--asd-n need --spec asd"));
  EXPECT_THAT(error_of({"--spec", "every-other", "--every-other-first", "9"}),
              ::testing::HasSubstr("--every-other-first must be a layer in [0, 4)"));
  EXPECT_EQ(error_of({"--spec", "every-other"}), "");
}

TEST(DrafterKinds, ANameIsRegisteredOnce) {
  DrafterKinds kinds = builtin_drafter_kinds();
  EXPECT_THAT(kinds.choices(),
              ::testing::ElementsAre("none", "layer-skip", "swift", "asd", "early-exit", "lookup"));
  kinds.add(std::make_unique<EveryOtherKind>());
  EXPECT_THROW(kinds.add(std::make_unique<EveryOtherKind>()), Error);
  EXPECT_THROW(kinds.find("every-others"), Error);
}

}  // namespace
}  // namespace selfspec::testing
