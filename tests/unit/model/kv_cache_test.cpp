// KvCache::keep_rows on the CPU backend: the kept slots move down in every layer's K and V of
// every KV head (located through keys()/values(), not the block arithmetic keep_rows uses), every
// other float of the cache is untouched, the length becomes to + kept; bad slot lists throw with
// the cache (contents and length) unchanged.
#include "model/kv_cache.hpp"

#include "core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kLayers = 3;
constexpr std::int64_t kKvHeads = 2;
constexpr std::int64_t kHeadDim = 4;
constexpr std::int64_t kCapacity = 16;

class KvCacheKeepRows : public ::testing::Test {
 protected:
  void SetUp() override {
    // A distinct value in every float of the cache, then 10 filled slots.
    std::vector<float> values(static_cast<std::size_t>(kv_.bytes() / sizeof(float)));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) + 0.5f;
    backend_->upload(kv_.f32_keys(0), values.data(), kv_.bytes());
    kv_.extend(10);
  }

  std::vector<float> contents() const {
    std::vector<float> values(static_cast<std::size_t>(kv_.bytes() / sizeof(float)));
    backend_->download(values.data(), kv_.f32_keys(0), kv_.bytes());
    return values;
  }
  // The index in contents() of float k of slot `slot` of KV head `head` in layer `layer`'s K or V.
  std::size_t index(std::int64_t layer, bool value, std::int64_t head, std::int64_t slot,
                    std::int64_t k) const {
    const float* tensor = value ? kv_.f32_values(layer) : kv_.f32_keys(layer);
    return static_cast<std::size_t>(tensor - kv_.f32_keys(0) +
                                    (head * kCapacity + slot) * kHeadDim + k);
  }

  std::unique_ptr<Backend> backend_ = make_cpu_backend();
  KvCache kv_{*backend_, kLayers, kKvHeads, kHeadDim, kCapacity};
};

TEST_F(KvCacheKeepRows, MovesTheKeptSlotsInEveryLayerAndHead) {
  const std::vector<float> before = contents();
  // A tree after 3 cached slots (nodes at slots 3..9); the accepted path is nodes 0, 2, 5, 6.
  const std::vector<std::int32_t> from = {3, 5, 8, 9};
  kv_.keep_rows(*backend_, 3, from);
  EXPECT_EQ(kv_.length(), 7);

  std::vector<float> expected = before;
  for (std::int64_t layer = 0; layer < kLayers; ++layer) {
    for (const bool value : {false, true}) {
      for (std::int64_t head = 0; head < kKvHeads; ++head) {
        for (std::size_t i = 0; i < from.size(); ++i) {
          for (std::int64_t k = 0; k < kHeadDim; ++k) {
            expected[index(layer, value, head, 3 + static_cast<std::int64_t>(i), k)] =
                before[index(layer, value, head, from[i], k)];
          }
        }
      }
    }
  }
  ASSERT_NE(expected, before);
  EXPECT_EQ(contents(), expected);
}

TEST_F(KvCacheKeepRows, KeepingNoRowsTruncates) {
  const std::vector<float> before = contents();
  kv_.keep_rows(*backend_, 4, {});
  EXPECT_EQ(kv_.length(), 4);
  EXPECT_EQ(contents(), before);
}

TEST_F(KvCacheKeepRows, RejectsBadSlotsAndLeavesTheCacheUnchanged) {
  const std::vector<float> before = contents();
  const auto expect_rejected = [&](std::int64_t to, const std::vector<std::int32_t>& from,
                                   const std::string& message) {
    SCOPED_TRACE(message);
    try {
      kv_.keep_rows(*backend_, to, from);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(message));
    }
    EXPECT_EQ(kv_.length(), 10);
    EXPECT_EQ(contents(), before);
  };
  expect_rejected(3, {4, 10}, "from[1] = 10 is at or past the current length 10");
  expect_rejected(11, {}, "destination slot 11 is outside [0, 10]");
  expect_rejected(-1, {2}, "destination slot -1");
  expect_rejected(3, {5, 4}, "does not follow");
  expect_rejected(3, {2}, "lies before its destination row 3");
}

}  // namespace
}  // namespace selfspec::testing

namespace selfspec::testing {
namespace {

// A region (slots [6, 11) of the cache above) keeps the rows of its own slots only: the region's
// slot i is the owner's slot 6 + i in every layer and head, and nothing outside it changes.
TEST_F(KvCacheKeepRows, ARegionMovesItsOwnSlotsAndNothingElse) {
  const std::vector<float> before = contents();
  KvCache region = kv_.region(6, 5);
  EXPECT_EQ(region.capacity(), 5);
  EXPECT_EQ(region.head_stride(), kCapacity);
  EXPECT_EQ(region.length(), 0);
  EXPECT_EQ(region.first_slot_in(kv_), 6);
  EXPECT_EQ(region.bytes(), 0u);
  region.extend(4);
  const std::vector<std::int32_t> from = {2, 3};
  region.keep_rows(*backend_, 1, from);
  EXPECT_EQ(region.length(), 3);
  EXPECT_EQ(kv_.length(), 10) << "the owner's length is its own";
  std::vector<float> expected = before;
  for (std::int64_t layer = 0; layer < kLayers; ++layer) {
    for (const bool value : {false, true}) {
      for (std::int64_t head = 0; head < kKvHeads; ++head) {
        for (std::size_t i = 0; i < from.size(); ++i) {
          for (std::int64_t k = 0; k < kHeadDim; ++k) {
            expected[index(layer, value, head, 6 + 1 + static_cast<std::int64_t>(i), k)] =
                before[index(layer, value, head, 6 + from[i], k)];
          }
        }
      }
    }
  }
  EXPECT_EQ(contents(), expected);
  EXPECT_EQ(region.f32_keys(1), kv_.f32_keys(1) + 6 * kHeadDim);
}

TEST_F(KvCacheKeepRows, ARegionOutsideTheCacheIsRefused) {
  EXPECT_THAT([&] { (void)kv_.region(12, 5); },
              ::testing::ThrowsMessage<Error>(HasSubstr("[12, 17) is outside the cache's 16")));
  EXPECT_THAT([&] { (void)kv_.region(-1, 2); }, ::testing::Throws<Error>());
  KvCache other{*backend_, kLayers, kKvHeads, kHeadDim, kCapacity};
  EXPECT_THAT([&] { (void)kv_.region(2, 3).first_slot_in(other); },
              ::testing::ThrowsMessage<Error>(HasSubstr("not a region")));
}

}  // namespace
}  // namespace selfspec::testing
