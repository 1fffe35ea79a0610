// The control message's wire properties: a checksum over every byte, the skip mask of LayerPlan's
// wire form.
#include "decode/control_message.hpp"

#include "model/layer_plan.hpp"

#include <gtest/gtest.h>

namespace selfspec {
namespace {

TEST(ControlMessage, ChecksumCoversEveryField) {
  ControlMessage a;
  const std::uint64_t base = a.checksum();
  ControlMessage b = a;
  EXPECT_EQ(b.checksum(), base);
  b.tokens[ControlMessage::kMaxTokens - 1] = 1;
  EXPECT_NE(b.checksum(), base);
  b = a;
  b.skip_mask[LayerPlan::kMaskWords - 1] = 1;
  EXPECT_NE(b.checksum(), base);
  b = a;
  b.step = 1;
  EXPECT_NE(b.checksum(), base);
}

TEST(ControlMessage, CarriesALayerPlanThroughItsMask) {
  const LayerPlan plan = LayerPlan::skipping(40, std::vector<int>{3, 39}, std::vector<int>{0, 17});
  ControlMessage message;
  plan.to_mask(message.skip_mask);
  EXPECT_EQ(LayerPlan::from_mask(40, message.skip_mask), plan);
}

}  // namespace
}  // namespace selfspec
