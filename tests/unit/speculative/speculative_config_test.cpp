// SpeculativeConfig: one function makes it from settings of any source, a bad value from any
// source gets one error naming the field and what it allows, to_json() round-trips, and adding a
// draft-length controller is one file and one registry line (a toy controller, written here as a
// product controller's file would be, registered in a registry of its own and drafting through
// the config and the setup losslessly).
#include "speculative/speculative_config.hpp"
#include "comm/local_comm.hpp"
#include "control/controller_kinds.hpp"
#include "core/error.hpp"
#include "decode/decoder.hpp"
#include "engine/engine.hpp"
#include "speculative/speculative_setup.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_models.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

std::string error_of(const nlohmann::json& settings, SettingSource source = SettingSource::kJson,
                     bool lists = false) {
  try {
    speculative_config(settings, source, {}, lists);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SpeculativeConfig, DefaultsArePlainDecoding) {
  const SpeculativeConfig config = speculative_config(nlohmann::json::object());
  EXPECT_FALSE(config.enabled());
  EXPECT_EQ(config.controllers, std::vector<std::string>{"adaptive"});
  EXPECT_EQ(config.controller.max_draft, 12);
  EXPECT_EQ(config.logits, std::vector<LogitsMode>{LogitsMode::kLocal});
}

TEST(SpeculativeConfig, CommandLineTextAndJsonValuesGiveTheSameConfig) {
  const SpeculativeConfig from_text = speculative_config({{"spec", "layer-skip"},
                                                          {"skip-attn", "1,3"},
                                                          {"controller", "threshold"},
                                                          {"threshold", "0.4"},
                                                          {"max-draft", "5"},
                                                          {"lookup", "3"},
                                                          {"tree", "swift"},
                                                          {"debug-sync", true}},
                                                         SettingSource::kCommandLine);
  const SpeculativeConfig from_json = speculative_config({{"spec", "layer-skip"},
                                                          {"skip_attn", {1, 3}},
                                                          {"controller", "threshold"},
                                                          {"threshold", 0.4},
                                                          {"max_draft", 5},
                                                          {"lookup", 3},
                                                          {"tree", "swift"},
                                                          {"debug_sync", true}});
  EXPECT_EQ(from_text.to_json(), from_json.to_json());
  EXPECT_EQ(from_json.drafter, "layer-skip");
  EXPECT_EQ(from_json.drafter_settings["skip-attn"], nlohmann::json({1, 3}));
  EXPECT_EQ(from_json.controller.kind, "threshold");
  EXPECT_EQ(from_json.controller.threshold, 0.4);
  EXPECT_EQ(from_json.controller.max_draft, 5);
  EXPECT_EQ(from_json.lookup.max_ngram, 3);
  EXPECT_EQ(from_json.tree.widths, "swift");
  EXPECT_TRUE(from_json.debug_sync);
}

TEST(SpeculativeConfig, ToJsonRoundTrips) {
  for (const nlohmann::json& settings : {
           nlohmann::json::object(),
           nlohmann::json{{"controller", "fixed"}, {"gamma0", 0.3}},
           nlohmann::json{{"spec", "swift"},
                          {"swift-ratio", 0.3},
                          {"controller", "thompson"},
                          {"prior-alpha", 2.0},
                          {"draft-weights", "q4_0"},
                          {"tree", "0.5:4,1:1"},
                          {"tree-max-nodes", 40},
                          {"logits", "gather"}},
           nlohmann::json{{"spec", "lookup"},
                          {"lookup", 3},
                          {"lookup-min-ngram", 1},
                          {"lookup-max-draft", 6},
                          {"draft-vocab-size", 0}},
           nlohmann::json{{"spec", "asd"},
                          {"lookup", 3},
                          {"lookup-tree", true},
                          {"lookup-min-reach", 0.25}},
       }) {
    const SpeculativeConfig config = speculative_config(settings);
    const nlohmann::json written = config.to_json();
    EXPECT_EQ(speculative_config(written).to_json(), written) << settings.dump();
  }
}

TEST(SpeculativeConfig, ListsOnlyWhereAsked) {
  const SpeculativeConfig config =
      speculative_config({{"spec", "asd"},
                          {"controller", "adaptive,thompson"},
                          {"logits", "local,gather"},
                          {"draft-vocab-size", "0,1000"}},
                         SettingSource::kCommandLine, {}, /*lists=*/true);
  EXPECT_EQ(config.controllers, (std::vector<std::string>{"adaptive", "thompson"}));
  EXPECT_EQ(config.logits, (std::vector<LogitsMode>{LogitsMode::kLocal, LogitsMode::kGather}));
  EXPECT_EQ(config.draft_vocab.sizes, (std::vector<std::int64_t>{0, 1000}));
  EXPECT_EQ(speculative_config(config.to_json(), SettingSource::kJson, {}, true).to_json(),
            config.to_json());
  EXPECT_EQ(
      error_of({{"spec", "asd"}, {"controller", "adaptive,thompson"}}, SettingSource::kCommandLine),
      "--controller must be one of fixed, threshold, adaptive, thompson, cali-ts (got "
      "'adaptive,thompson')");
}

TEST(SpeculativeConfig, BadValuesNameTheFieldAndWhatItAllows) {
  EXPECT_EQ(error_of({{"max-draft", 64}}), "\"max-draft\" must be an integer in [1, 63] (got 64)");
  EXPECT_EQ(error_of({{"max-draft", "64"}}, SettingSource::kCommandLine),
            "--max-draft must be an integer in [1, 63] (got '64')");
  EXPECT_EQ(error_of({{"max-draft", "8"}}),  // JSON wants a number, not text
            "\"max-draft\" must be an integer in [1, 63] (got '8')");
  EXPECT_EQ(error_of({{"controller", "oracle"}}),
            "\"controller\" must be one of fixed, threshold, adaptive, thompson, cali-ts (got "
            "'oracle')");
  EXPECT_EQ(error_of({{"spec", "eagle"}}),
            "\"spec\" must be one of none, layer-skip, swift, asd, early-exit, feature-head, "
            "lookup (got 'eagle')");
  EXPECT_EQ(error_of({{"spec", "layer-skip"}, {"skip-uniform", 1.5}}),
            "\"skip-uniform\" must be a number in [0, 0.99] (got 1.5)");
  EXPECT_EQ(error_of({{"spec", "layer-skip"}, {"skip-config", "/nonexistent.yaml"}}),
            "\"skip-config\" must be an existing file (got '/nonexistent.yaml')");
  EXPECT_THAT(error_of({{"max-drafts", 4}}),
              HasSubstr("\"max-drafts\" is not a self-speculative setting (known: spec, "));
  EXPECT_THAT(error_of(nlohmann::json::array()), HasSubstr("must be a JSON object"));
}

TEST(SpeculativeConfig, BadCombinationsAreRefusedByName) {
  EXPECT_THAT(error_of({{"spec", "layer-skip"}}), HasSubstr("exactly one skip set"));
  EXPECT_THAT(error_of({{"skip-attn", {1}}}), HasSubstr("need --spec layer-skip"));
  EXPECT_THAT(error_of({{"lookup", 3}}), HasSubstr("need self-speculative decoding"));
  EXPECT_THAT(error_of({{"spec", "lookup"}}), HasSubstr("--spec lookup drafts with --lookup N"));
  EXPECT_THAT(error_of({{"spec", "asd"}, {"lookup", 2}, {"lookup-min-ngram", 3}}),
              HasSubstr("--lookup 2 is shorter than --lookup-min-ngram 3"));
  // Grafted lookups need lookups, and a drafter of the model's own to graft them onto.
  EXPECT_THAT(error_of({{"spec", "asd"}, {"lookup-tree", true}}),
              HasSubstr("--lookup-tree and --lookup-min-reach shape lookup drafts: they need "
                        "--lookup N"));
  EXPECT_THAT(error_of({{"lookup-min-reach", 0.5}}), HasSubstr("need self-speculative decoding"));
  EXPECT_THAT(error_of({{"spec", "lookup"}, {"lookup", 3}, {"lookup-tree", true}}),
              HasSubstr("--spec lookup drafts nothing of its own"));
  EXPECT_EQ(error_of({{"spec", "lookup"}, {"lookup", 3}, {"lookup-min-reach", 1.5}}),
            "\"lookup-min-reach\" must be a number in [0, 1] (got 1.5)");
  EXPECT_EQ(error_of({{"spec", "lookup"}, {"lookup", 3}, {"lookup-min-reach", 0.5}}), "");
  EXPECT_THAT(error_of({{"spec", "asd"}, {"cali-theta0", 0.2}}),
              HasSubstr("--cali-theta0 needs --controller cali-ts"));
  EXPECT_THAT(error_of({{"spec", "asd"}, {"controller", "cali-ts"}}),
              HasSubstr("--controller cali-ts and --cali-predictor FILE go together"));
  EXPECT_THAT(error_of({{"spec", "asd"}, {"tree", "0.5:x"}}), HasSubstr("--tree"));
  // A run config written for one controller may still set another's parameters.
  EXPECT_EQ(error_of({{"spec", "asd"}, {"controller", "fixed"}, {"gamma0", 0.7}}), "");
}

// A toy controller, as a product controller's file would declare it: a setting of its own, kept
// in ControllerOptions::params by ControllerKind::read's default.
class EveryOtherRoundController final : public DraftLengthController {
 public:
  explicit EveryOtherRoundController(const ControllerOptions& options)
      : max_draft_(options.max_draft), short_(options.params.value("short-draft", 1)) {}
  std::string_view name() const override { return "every-other-round"; }
  int max_draft() const override { return max_draft_; }
  void begin_round() override { ++round_; }
  bool continue_drafting(int drafted, double /*confidence*/) override {
    return drafted < (round_ % 2 == 0 ? max_draft_ : short_);
  }
  void update(int /*drafted*/, int /*accepted*/) override {}
  nlohmann::json state() const override { return {{"round", round_}, {"short", short_}}; }

 private:
  int max_draft_;
  int short_;
  int round_ = 0;
};

class EveryOtherRoundKind final : public ControllerKind {
 public:
  std::string_view name() const override { return "every-other-round"; }
  std::string_view help() const override { return "K tokens every other round"; }
  std::vector<SettingSpec> settings() const override {
    return {{.key = "short-draft",
             .type = SettingType::kInt,
             .help = "tokens drafted in the short rounds",
             .fallback = 1,
             .min = 1,
             .max = kMaxDraftTokens}};
  }
  std::unique_ptr<DraftLengthController> make(const ControllerOptions& options) const override {
    return std::make_unique<EveryOtherRoundController>(options);
  }
};

TEST(ToyControllerKind, DraftsLosslesslyThroughTheConfigAndTheSetup) {
  ControllerKinds controllers;
  controllers.add(std::make_unique<EveryOtherRoundKind>());  // the registry line
  SpeculativeKinds kinds;
  kinds.controllers = &controllers;

  TempDir dir("selfspec-toy-controller");
  write_tiny_checkpoint(speculative_tiny_spec(4), dir.path());
  LocalComm comm;
  EngineOptions engine_options;
  engine_options.source.model_path = dir.path();
  engine_options.device = "cpu";
  Engine engine(engine_options, comm);

  EXPECT_THAT(
      [&] {
        try {
          speculative_config({{"spec", "layer-skip"},
                              {"skip-uniform", 0.3},
                              {"controller", "every-other-round"},
                              {"short-draft", 0}},
                             SettingSource::kJson, kinds);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("\"short-draft\" must be an integer in [1, 63] (got 0)"));
  const SpeculativeConfig config = speculative_config({{"spec", "layer-skip"},
                                                       {"skip-uniform", 0.3},
                                                       {"controller", "every-other-round"},
                                                       {"short-draft", 2},
                                                       {"max-draft", 5}},
                                                      SettingSource::kJson, kinds);
  SpeculativeSetup setup(config, engine, kinds);
  engine.load();
  setup.attach(engine);

  GenerationOptions generation;
  generation.max_new_tokens = 24;
  generation.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {3, 14, 15, 9, 2};
  KvCache plain_kv = engine.model().make_kv_cache(64);
  const GenerationResult plain =
      Decoder(engine.model(), engine.comm()).generate(prompt, generation, plain_kv);
  const std::unique_ptr<Drafter> drafter = setup.make_drafter(0);
  const std::unique_ptr<DraftLengthController> controller =
      setup.make_controller("every-other-round", 0);
  EXPECT_EQ(controller->state()["short"], 2);
  KvCache kv = engine.model().make_kv_cache(64);
  const GenerationResult drafted = Decoder(engine.model(), engine.comm(), *drafter, *controller)
                                       .generate(prompt, setup.generation(generation, nullptr), kv);
  EXPECT_EQ(drafted.tokens, plain.tokens);
  EXPECT_GT(drafted.stats.draft_forwards, 0);
}

}  // namespace
}  // namespace selfspec::testing
