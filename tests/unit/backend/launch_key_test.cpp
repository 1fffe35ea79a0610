// launch_key (the graph key of recording backends) and Backend::run_forward's own checks, without
// a GPU: the key changes with every field of the LaunchShape that shapes the launches and with
// nothing else; run_forward runs the launches once and refuses a shape that disagrees with the
// inputs.
#include "backend/backend.hpp"
#include "core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <set>
#include <vector>

namespace selfspec {
namespace {

using ::testing::HasSubstr;

// A decode-like shape over storage the test owns.
struct ShapeFixture {
  std::array<std::uint64_t, 8> words{};
  std::vector<std::int32_t> rows = {0, 2};
  std::array<float, 4> kv_a{};
  std::array<float, 4> kv_b{};
  LaunchShape shape() const {
    LaunchShape s;
    s.plan_words = words;
    s.n_tokens = 3;
    s.tree_mask = false;
    s.logit_rows = rows;
    s.kv_cache = kv_a.data();
    s.kv_capacity = 64;
    return s;
  }
};

TEST(LaunchKey, EqualShapesHaveEqualKeysWhateverTheirStorage) {
  const ShapeFixture a;
  ShapeFixture b;  // the same values in other storage
  b.words = a.words;
  LaunchShape other = b.shape();
  other.kv_cache = a.kv_a.data();
  EXPECT_EQ(launch_key(a.shape()), launch_key(other));
  LaunchShape unrecordable = a.shape();
  unrecordable.recordable = false;
  EXPECT_EQ(launch_key(a.shape()), launch_key(unrecordable)) << "recordable is not in the key";
}

TEST(LaunchKey, DiffersWhenAnythingThatShapesTheLaunchesDiffers) {
  ShapeFixture f;
  const LaunchShape base = f.shape();
  std::vector<std::pair<const char*, std::uint64_t>> keys = {{"base", launch_key(base)}};

  std::array<std::uint64_t, 8> attention_skipped = f.words;
  attention_skipped[0] = 1;  // attention of layer 0 skipped
  std::array<std::uint64_t, 8> mlp_skipped = f.words;
  mlp_skipped[4] = 2;  // MLP of layer 1 skipped
  LaunchShape s = base;
  s.plan_words = attention_skipped;
  keys.emplace_back("attention skipped", launch_key(s));
  s.plan_words = mlp_skipped;
  keys.emplace_back("mlp skipped", launch_key(s));

  s = base;
  s.n_tokens = 4;
  keys.emplace_back("T", launch_key(s));
  s = base;
  s.tree_mask = true;
  keys.emplace_back("tree mask", launch_key(s));

  const std::vector<std::int32_t> other_rows = {0, 1};
  const std::vector<std::int32_t> more_rows = {0, 1, 2};
  const std::vector<std::int32_t> no_rows;
  s = base;
  s.logit_rows = other_rows;
  keys.emplace_back("other logit rows", launch_key(s));
  s.logit_rows = more_rows;
  keys.emplace_back("more logit rows", launch_key(s));
  s.logit_rows = no_rows;
  keys.emplace_back("no logit rows", launch_key(s));

  s = base;
  s.kv_cache = f.kv_b.data();
  keys.emplace_back("other KV cache", launch_key(s));
  s = base;
  s.kv_capacity = 65;
  keys.emplace_back("KV capacity", launch_key(s));
  s = base;
  s.draft_vocabulary = &f;  // any identity: a pruned draft vocabulary's LM head
  keys.emplace_back("draft vocabulary", launch_key(s));

  std::set<std::uint64_t> distinct;
  for (const auto& [what, key] : keys) {
    EXPECT_TRUE(distinct.insert(key).second) << what << " collides with an earlier shape";
  }
}

class CountingLaunches {
 public:
  std::function<void()> launches() {
    return [this] { ++calls_; };
  }
  int calls() const { return calls_; }

 private:
  int calls_ = 0;
};

TEST(RunForward, RunsTheLaunchesOnceOnTheCpuBackend) {
  const std::unique_ptr<Backend> backend = make_cpu_backend();
  const std::vector<std::int32_t> tokens = {5, 6, 7};
  const std::vector<std::int32_t> positions = {0, 1, 2};
  const std::vector<std::int32_t> rows = {0, 2};
  const std::array<std::uint64_t, 8> words{};
  const ForwardInputs inputs{tokens, positions, 0, nullptr, rows, {}};
  LaunchShape shape;
  shape.plan_words = words;
  shape.n_tokens = 3;
  shape.logit_rows = rows;
  CountingLaunches counter;
  backend->run_forward(inputs, shape, counter.launches());
  EXPECT_EQ(counter.calls(), 1);
}

TEST(RunForward, RefusesAShapeThatDisagreesWithTheInputs) {
  const std::unique_ptr<Backend> backend = make_cpu_backend();
  const std::vector<std::int32_t> tokens = {5, 6};
  const std::vector<std::int32_t> positions = {3, 4};
  const std::vector<std::int32_t> rows = {1};
  const std::vector<std::uint8_t> mask = {1, 0, 1, 1};
  const ForwardInputs inputs{tokens, positions, 3, nullptr, rows, {}};
  LaunchShape good;
  good.n_tokens = 2;
  good.logit_rows = rows;
  CountingLaunches counter;

  LaunchShape wrong_count = good;
  wrong_count.n_tokens = 1;
  EXPECT_THAT([&] { backend->run_forward(inputs, wrong_count, counter.launches()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("launch shape for 1 tokens")));

  LaunchShape wrong_mask = good;
  wrong_mask.tree_mask = true;
  EXPECT_THAT([&] { backend->run_forward(inputs, wrong_mask, counter.launches()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tree mask")));
  const ForwardInputs masked{tokens, positions, 3, mask.data(), rows, {}};
  EXPECT_THAT([&] { backend->run_forward(masked, good, counter.launches()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tree mask")));

  const std::vector<std::int32_t> other_rows = {0};
  LaunchShape wrong_rows = good;
  wrong_rows.logit_rows = other_rows;
  EXPECT_THAT([&] { backend->run_forward(inputs, wrong_rows, counter.launches()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("logit rows")));
  EXPECT_EQ(counter.calls(), 0) << "a refused pass runs no launches";

  backend->run_forward(inputs, good, counter.launches());
  EXPECT_EQ(counter.calls(), 1);
}

TEST(RunForward, RefusesSequenceSegmentsThatDoNotCoverTheTokensInOrder) {
  const std::unique_ptr<Backend> backend = make_cpu_backend();
  const std::vector<std::int32_t> tokens = {5, 6, 7};
  const std::vector<std::int32_t> positions = {0, 1, 4};
  const std::vector<std::int32_t> rows = {1, 2};
  LaunchShape shape;
  shape.n_tokens = 3;
  shape.logit_rows = rows;
  shape.segmented = true;
  CountingLaunches counter;
  const auto run = [&](std::vector<KvSegment> segments) {
    const ForwardInputs inputs{tokens, positions, 0, nullptr, rows, segments};
    backend->run_forward(inputs, shape, counter.launches());
  };
  EXPECT_THAT(
      [&] {
        run({{0, 2, 0, 0}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("cover 2 tokens of 3")));
  EXPECT_THAT(
      [&] {
        run({{0, 2, 0, 0}, {1, 1, 8, 4}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("does not follow")));
  EXPECT_THAT(
      [&] {
        run({{0, 2, 0, 0}, {2, 0, 8, 4}, {2, 1, 16, 0}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("does not follow")));
  LaunchShape one = shape;
  one.segmented = false;
  const std::vector<KvSegment> two = {{0, 2, 0, 0}, {2, 1, 8, 4}};
  const ForwardInputs segmented{tokens, positions, 0, nullptr, rows, two};
  EXPECT_THAT([&] { backend->run_forward(segmented, one, counter.launches()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("sequences")));
  EXPECT_EQ(counter.calls(), 0) << "a refused pass runs no launches";
  run(two);
  EXPECT_EQ(counter.calls(), 1);
}

}  // namespace
}  // namespace selfspec
