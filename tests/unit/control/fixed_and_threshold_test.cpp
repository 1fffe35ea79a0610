// The fixed-K baseline and the static confidence threshold (Draft & Verify §3.4 with constant γ):
// decisions at, below and above γ, the max_draft cap, and that verification changes nothing.
#include "control/confidence_threshold_controller.hpp"
#include "control/fixed_length_controller.hpp"

#include <gtest/gtest.h>

namespace selfspec {
namespace {

TEST(FixedLengthController, DraftsExactlyK) {
  ControllerOptions options;
  options.max_draft = 5;
  FixedLengthController controller(options);
  EXPECT_EQ(controller.name(), "fixed");
  EXPECT_EQ(controller.max_draft(), 5);
  for (int round = 0; round < 3; ++round) {
    controller.begin_round();
    for (int drafted = 1; drafted < 5; ++drafted) {
      EXPECT_TRUE(controller.continue_drafting(drafted, 0.0)) << drafted;  // confidence ignored
    }
    EXPECT_FALSE(controller.continue_drafting(5, 1.0));  // the cap
    controller.update(5, round);
  }
  EXPECT_EQ(controller.state(), nlohmann::json({{"k", 5}}));
}

TEST(FixedLengthController, KOfOneNeverContinues) {
  ControllerOptions options;
  options.max_draft = 1;
  FixedLengthController controller(options);
  EXPECT_FALSE(controller.continue_drafting(1, 1.0));
}

TEST(ConfidenceThresholdController, ContinuesIffConfidenceAtLeastGamma) {
  ControllerOptions options;
  options.threshold = 0.6;
  options.max_draft = 12;
  ConfidenceThresholdController controller(options);
  EXPECT_EQ(controller.name(), "threshold");
  EXPECT_TRUE(controller.continue_drafting(1, 0.6));  // at γ: Alg. 3 exits only on p < γ
  EXPECT_TRUE(controller.continue_drafting(1, 0.9));  // above
  EXPECT_TRUE(controller.continue_drafting(3, 1.0));
  EXPECT_FALSE(controller.continue_drafting(1, 0.5999999));  // below
  EXPECT_FALSE(controller.continue_drafting(2, 0.0));
}

TEST(ConfidenceThresholdController, CapAtMaxDraft) {
  ControllerOptions options;
  options.threshold = 0.6;
  options.max_draft = 3;
  ConfidenceThresholdController controller(options);
  EXPECT_TRUE(controller.continue_drafting(2, 0.99));
  EXPECT_FALSE(controller.continue_drafting(3, 0.99));
  EXPECT_FALSE(controller.continue_drafting(3, 1.0));
}

TEST(ConfidenceThresholdController, GammaIsStatic) {
  ControllerOptions options;
  options.threshold = 0.45;
  ConfidenceThresholdController controller(options);
  controller.update(4, 0);
  controller.update(12, 12);
  controller.update(1, 1);
  EXPECT_EQ(controller.gamma(), 0.45);
  EXPECT_EQ(controller.state(), nlohmann::json({{"gamma", 0.45}}));
  EXPECT_FALSE(controller.continue_drafting(1, 0.44));
  EXPECT_TRUE(controller.continue_drafting(1, 0.45));
}

TEST(ConfidenceThresholdController, ZeroAndOneThresholds) {
  ControllerOptions options;
  options.max_draft = 8;
  options.threshold = 0.0;
  ConfidenceThresholdController always(options);
  EXPECT_TRUE(always.continue_drafting(1, 0.0));
  EXPECT_FALSE(always.continue_drafting(8, 0.0));
  options.threshold = 1.0;
  ConfidenceThresholdController never(options);
  EXPECT_FALSE(never.continue_drafting(1, 0.999999));
  EXPECT_TRUE(never.continue_drafting(1, 1.0));
}

}  // namespace
}  // namespace selfspec
