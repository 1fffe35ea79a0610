// ControllerOptions::validate() and make_draft_length_controller(): the defaults are the papers'
// (Draft & Verify Table 7; a uniform Beta(1, 1) prior for EESD), every out-of-range option is
// rejected with a message naming it, the range its kind declares and the offending value, and the
// factory knows the registered kinds.
#include "control/adaptive_threshold_controller.hpp"
#include "control/draft_length_controller.hpp"
#include "control/fixed_length_controller.hpp"
#include "control/thompson_sampling_controller.hpp"
#include "core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace selfspec {
namespace {

using ::testing::HasSubstr;

std::string validation_error(const ControllerOptions& options) {
  try {
    options.validate();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(ControllerOptions, DefaultsAreTheTable7ValuesAndValid) {
  const ControllerOptions options;
  EXPECT_EQ(options.kind, "adaptive");
  EXPECT_EQ(options.max_draft, 12);
  EXPECT_EQ(options.gamma0, 0.6);
  EXPECT_EQ(options.epsilon, 0.01);
  EXPECT_EQ(options.beta1, 0.5);
  EXPECT_EQ(options.beta2, 0.9);
  EXPECT_EQ(options.target_acceptance, 0.85);
  EXPECT_EQ(options.prior_alpha, 1.0);
  EXPECT_EQ(options.prior_beta, 1.0);
  EXPECT_EQ(validation_error(options), "");
}

TEST(ControllerOptions, BoundaryValuesAreAccepted) {
  for (const auto& edit : std::vector<std::function<void(ControllerOptions&)>>{
           [](ControllerOptions& o) { o.max_draft = 1; },
           [](ControllerOptions& o) { o.max_draft = kMaxDraftTokens; },
           [](ControllerOptions& o) { o.threshold = 0.0; },
           [](ControllerOptions& o) { o.threshold = 1.0; },
           [](ControllerOptions& o) { o.gamma0 = 0.0; },
           [](ControllerOptions& o) { o.gamma0 = 1.0; },
           [](ControllerOptions& o) { o.epsilon = 0.0; },
           [](ControllerOptions& o) { o.beta1 = 0.0; },
           [](ControllerOptions& o) { o.beta2 = 0.0; },
           [](ControllerOptions& o) { o.target_acceptance = 1.0; },
           [](ControllerOptions& o) { o.prior_alpha = 1e-3; },
           [](ControllerOptions& o) { o.prior_beta = 1e3; },
       }) {
    ControllerOptions options;
    edit(options);
    EXPECT_EQ(validation_error(options), "");
  }
}

struct BadOption {
  std::function<void(ControllerOptions&)> edit;
  std::string message;
};

TEST(ControllerOptions, OutOfRangeValuesNameTheOptionAndValue) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<BadOption> cases = {
      {[](ControllerOptions& o) { o.max_draft = 0; },
       "--max-draft must be an integer in [1, 63] (got 0)"},
      {[](ControllerOptions& o) { o.max_draft = 64; },
       "--max-draft must be an integer in [1, 63] (got 64)"},
      {[](ControllerOptions& o) { o.threshold = -0.1; },
       "--threshold must be a number in [0, 1] (got -0.1)"},
      {[](ControllerOptions& o) { o.threshold = 1.01; },
       "--threshold must be a number in [0, 1] (got 1.01)"},
      {[=](ControllerOptions& o) { o.threshold = nan; },
       "--threshold must be a number in [0, 1] (got nan)"},
      {[](ControllerOptions& o) { o.gamma0 = 1.5; },
       "--gamma0 must be a number in [0, 1] (got 1.5)"},
      {[](ControllerOptions& o) { o.epsilon = -0.01; },
       "--epsilon must be a number >= 0 (got -0.01)"},
      {[=](ControllerOptions& o) { o.epsilon = inf; }, "--epsilon must be a number >= 0 (got inf)"},
      {[](ControllerOptions& o) { o.beta1 = 1.0; }, "--beta1 must be a number in [0, 1) (got 1)"},
      {[](ControllerOptions& o) { o.beta1 = -0.5; },
       "--beta1 must be a number in [0, 1) (got -0.5)"},
      {[](ControllerOptions& o) { o.beta2 = 1.0; }, "--beta2 must be a number in [0, 1) (got 1)"},
      {[](ControllerOptions& o) { o.target_acceptance = 1.5; },
       "--target-acceptance must be a number in (0, 1] (got 1.5)"},
      {[](ControllerOptions& o) { o.target_acceptance = 0.0; },
       "--target-acceptance must be a number in (0, 1] (got 0)"},
      {[](ControllerOptions& o) { o.prior_alpha = 0.0; },
       "--prior-alpha must be a number > 0 (got 0)"},
      {[=](ControllerOptions& o) { o.prior_alpha = inf; },
       "--prior-alpha must be a number > 0 (got inf)"},
      {[](ControllerOptions& o) { o.prior_beta = -1.0; },
       "--prior-beta must be a number > 0 (got -1)"},
      {[=](ControllerOptions& o) { o.prior_beta = nan; },
       "--prior-beta must be a number > 0 (got nan)"},
      {[](ControllerOptions& o) { o.sigma_m = 0.0; },
       "--cali-sigma-m must be a number > 0 (got 0)"},
      {[](ControllerOptions& o) { o.sigma_s = 0.0; },
       "--cali-sigma-s must be a number > 0 (got 0)"},
      {[](ControllerOptions& o) { o.theta0 = 1.5; },
       "--cali-theta0 must be a number in [0, 1] (got 1.5)"},
  };
  for (const BadOption& bad : cases) {
    ControllerOptions options;
    bad.edit(options);
    EXPECT_EQ(validation_error(options), bad.message);
  }
}

TEST(ControllerFactory, MakesEachKind) {
  for (const std::string kind : {"fixed", "threshold", "adaptive", "thompson"}) {
    ControllerOptions options;
    options.kind = kind;
    options.max_draft = 7;
    const auto controller = make_draft_length_controller(options);
    ASSERT_NE(controller, nullptr);
    EXPECT_EQ(controller->name(), kind);
    EXPECT_EQ(controller->max_draft(), 7);
  }
}

TEST(ControllerFactory, UnknownKindListsTheKnownOnes) {
  ControllerOptions options;
  options.kind = "eagle";
  try {
    make_draft_length_controller(options);
    FAIL() << "no error for an unknown kind";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("'eagle'"));
    EXPECT_THAT(error.what(), HasSubstr("fixed, threshold, adaptive, thompson, cali-ts"));
  }
}

TEST(ControllerFactory, RejectsInvalidOptions) {
  ControllerOptions options;
  options.kind = "thompson";
  options.prior_beta = 0.0;
  EXPECT_THROW(make_draft_length_controller(options), Error);
}

TEST(ControllerFactory, ConstructorsValidateToo) {
  ControllerOptions options;
  options.max_draft = 0;
  EXPECT_THROW(FixedLengthController{options}, Error);
  EXPECT_THROW(AdaptiveThresholdController{options}, Error);
  EXPECT_THROW(ThompsonSamplingController{options}, Error);
}

TEST(ControllerUpdate, RejectsImpossibleCounts) {
  for (const std::string kind : {"fixed", "threshold", "adaptive", "thompson"}) {
    ControllerOptions options;
    options.kind = kind;
    options.max_draft = 4;
    const auto controller = make_draft_length_controller(options);
    EXPECT_THROW(controller->update(0, 0), Error) << kind;
    EXPECT_THROW(controller->update(3, 4), Error) << kind;
    EXPECT_THROW(controller->update(3, -1), Error) << kind;
    EXPECT_THROW(controller->update(5, 1), Error) << kind;  // beyond max_draft
    EXPECT_THROW(controller->continue_drafting(0, 0.9), Error) << kind;
    EXPECT_NO_THROW(controller->update(4, 4)) << kind;
  }
}

}  // namespace
}  // namespace selfspec
