// Batched speculation (decode/speculative_batch.hpp): every request's tokens equal those of
// Decoder::generate on that request alone with the same drafter kind and controller, whatever the
// batch size, pass budget, arrival order and neighbours:
//  * greedy, for layer-skip drafts under every controller, chains and token trees (each
//    sequence's tree mask inside a shared pass), early exit, the draft-weight copy, lookups before
//    a model drafter or grafted onto its draft, SWIFT's on-the-fly search and Draft on the Fly's
//    prompt observer, mixed with plain requests; at TP 1 and 2;
//  * sampled, with each request's own seed: the same tokens as alone (reproducible per request);
//  * a request's tokens reach on_token as they are chosen, in order, and its result once;
//  * requests that arrive while others run join between passes, from a list or a feed (under the
//    feed's ids); a request whose interrupt fires stops with a prefix of its tokens;
//  * with goodput sizing (drafts capped by the load), greedy tokens stay the same;
//  * a request that fails mid-run ends the run with its error, the others unwound;
//  * bad input (an empty prompt, a request beyond the KV region, a speculating request without
//    drafters, bad options) is refused with a clear error before any forward.
#include "decode/speculative_batch.hpp"

#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "decode/decoder.hpp"
#include "draft/cosine_skip_drafter.hpp"
#include "draft/early_exit_drafter.hpp"
#include "draft/feature_head_drafter.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "draft/lookup_source.hpp"
#include "draft/sourced_drafter.hpp"
#include "draft/swift_drafter.hpp"
#include "tests/support/feature_head_file.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/thread_comm.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "tests/support/tiny_models.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>

namespace selfspec::testing {
namespace {

constexpr int kLayers = 4;

// How a test's requests draft: a fresh drafter for each request (every rank).
using MakeDrafter = std::function<std::unique_ptr<Drafter>()>;

std::unique_ptr<Drafter> skip_drafter() {
  return std::make_unique<LayerSkipDrafter>(
      LayerPlan::skipping(kLayers, std::vector<int>{1, 2}, std::vector<int>{1}), "test");
}

struct Case {
  MakeDrafter drafter = skip_drafter;
  ControllerOptions controller;
  std::string tree = "none";
  bool draft_weights = false;
  bool goodput = false;  // the batch sizes drafts to the load (drafts then differ from alone)
};

// Ragged prompts and budgets; every third request decodes plainly, every fourth samples with its
// own seed.
std::vector<SpeculativeRequest> requests_for(std::int64_t vocab, int count, const Case& c,
                                             bool sampled) {
  std::vector<SpeculativeRequest> requests;
  for (int r = 0; r < count; ++r) {
    SpeculativeRequest request;
    for (int i = 0; i < 2 + (5 * r) % 11; ++i)
      request.prompt.push_back(static_cast<std::int32_t>((3 + 7 * r + 11 * i) % vocab));
    // Repeats give lookups something to find.
    const std::vector<std::int32_t> head(request.prompt.begin(), request.prompt.begin() + 2);
    request.prompt.insert(request.prompt.end(), head.begin(), head.end());
    request.options.max_new_tokens = 6 + (r * 7) % 19;
    request.options.ignore_eos = true;
    request.options.logits = LogitsMode::kLocal;
    request.options.tree = TreeWidths::parse(c.tree);
    request.options.draft.draft_weights = c.draft_weights;
    request.speculate = r % 3 != 2;
    if (sampled && r % 4 == 1) {
      request.options.sampling.temperature = 0.9;
      request.options.sampling.top_k = r % 8 == 1 ? 0 : 8;
      request.options.sampling.seed = 100 + static_cast<std::uint64_t>(r);
    }
    requests.push_back(request);
  }
  return requests;
}

GenerationResult decode_alone(LlamaModel& model, Communicator& comm,
                              const SpeculativeRequest& request, const Case& c) {
  // What `selfspec generate` allocates.
  KvCache kv = model.make_kv_cache(static_cast<std::int64_t>(request.prompt.size()) +
                                   std::max<std::int64_t>(request.options.max_new_tokens, 1));
  if (!request.speculate) return Decoder(model, comm).generate(request.prompt, request.options, kv);
  const std::unique_ptr<Drafter> drafter = c.drafter();
  const auto controller = make_draft_length_controller(c.controller);
  return Decoder(model, comm, *drafter, *controller).generate(request.prompt, request.options, kv);
}

struct BatchOutcome {
  std::map<std::int64_t, GenerationResult> results;
  std::map<std::int64_t, std::vector<std::int32_t>> streamed;
  SpeculativeBatchStats stats;
};

BatchOutcome run_batch(LlamaModel& model, Communicator& comm,
                       std::span<const SpeculativeRequest> requests, const Case& c,
                       std::int64_t batch, std::int64_t pass_tokens,
                       std::function<std::int64_t(bool)> arrived = {}) {
  SpeculativeBatchOptions options;
  options.batch = batch;
  options.pass_tokens = pass_tokens;
  options.goodput = c.goodput;
  SpeculativeBatch loop(model, comm, options, [&](std::int64_t) {
    return SequenceSpeculators{c.drafter(), make_draft_length_controller(c.controller)};
  });
  BatchOutcome outcome;
  SpeculativeBatch::Hooks hooks;
  hooks.arrived = std::move(arrived);
  hooks.on_token = [&](std::int64_t r, std::int32_t t) { outcome.streamed[r].push_back(t); };
  hooks.on_done = [&](std::int64_t r, GenerationResult&& result) {
    EXPECT_FALSE(outcome.results.contains(r)) << "request " << r << " handed over twice";
    outcome.results[r] = std::move(result);
  };
  loop.run(requests, hooks);
  outcome.stats = loop.stats();
  return outcome;
}

// Every request's tokens equal its run alone; returns the drafted and accepted totals.
std::pair<std::int64_t, std::int64_t> expect_equal_to_alone(LlamaModel& model, Communicator& comm,
                                                            const Case& c, std::int64_t batch,
                                                            std::int64_t pass_tokens, bool sampled,
                                                            const std::string& label,
                                                            int count = 11) {
  const auto requests = requests_for(model.config().vocab_size, count, c, sampled);
  const BatchOutcome outcome = run_batch(model, comm, requests, c, batch, pass_tokens);
  EXPECT_EQ(outcome.results.size(), requests.size()) << label;
  std::int64_t drafted = 0, accepted = 0;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const auto found = outcome.results.find(static_cast<std::int64_t>(r));
    if (found == outcome.results.end()) continue;
    const GenerationResult alone = decode_alone(model, comm, requests[r], c);
    EXPECT_EQ(found->second.tokens, alone.tokens) << label << ", B " << batch << ", request " << r;
    if (!c.goodput) {
      EXPECT_EQ(found->second.stats.drafted, alone.stats.drafted) << label << ", request " << r;
    }
    if (comm.is_root()) {
      EXPECT_EQ(outcome.streamed.at(static_cast<std::int64_t>(r)), alone.tokens) << label;
    }
    drafted += found->second.stats.drafted;
    accepted += found->second.stats.accepted;
  }
  if (batch > 1) {
    EXPECT_GT(outcome.stats.max_sequences, 1) << label << ": never batched";
  }
  return {drafted, accepted};
}

ControllerOptions controller(const char* kind, int k) {
  ControllerOptions options;
  options.kind = kind;
  options.max_draft = k;
  options.threshold = 0.3;
  return options;
}

class SpeculativeBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = write_and_load_model(speculative_tiny_spec(kLayers), dir_.path(), comm_);
  }
  TempDir dir_;
  LocalComm comm_;
  std::unique_ptr<LlamaModel> model_;
};

TEST_F(SpeculativeBatchTest, GreedyTokensEqualEachRequestAloneForEveryControllerAndBatch) {
  std::int64_t accepted = 0;
  for (const char* kind : {"fixed", "threshold", "adaptive", "thompson"}) {
    for (std::int64_t batch : {1, 2, 3, 8}) {
      Case c;
      c.controller = controller(kind, 4);
      accepted +=
          expect_equal_to_alone(*model_, comm_, c, batch, 512, false, std::string(kind)).second;
    }
  }
  EXPECT_GT(accepted, 0) << "no draft token was ever accepted: verification untested";
}

TEST_F(SpeculativeBatchTest, SmallPassesSplitTheStepAndKeepTheTokens) {
  Case c;
  c.controller = controller("fixed", 6);
  for (std::int64_t pass_tokens : {64, 70}) {
    expect_equal_to_alone(*model_, comm_, c, 5, pass_tokens, false, "pass budget");
  }
}

TEST_F(SpeculativeBatchTest, TreesVerifyUnderEachSequencesOwnMask) {
  for (const char* tree : {"1:3", "0.6:4,1:2"}) {
    Case c;
    c.controller = controller("fixed", 4);
    c.tree = tree;
    const auto [drafted, accepted] =
        expect_equal_to_alone(*model_, comm_, c, 4, 512, false, std::string("tree ") + tree);
    EXPECT_GT(accepted, 0) << tree;
  }
}

TEST_F(SpeculativeBatchTest, SampledRequestsDrawTheSameTokensAsAlone) {
  for (const char* tree : {"none", "1:3"}) {
    Case c;
    c.controller = controller("fixed", 3);
    c.tree = tree;
    for (std::int64_t batch : {2, 6}) {
      expect_equal_to_alone(*model_, comm_, c, batch, 512, true, std::string("sampled ") + tree);
    }
  }
}

TEST_F(SpeculativeBatchTest, EveryDrafterKindBatchesLosslessly) {
  attach_layer_as_exit_head(*model_, dir_.path(), 2);
  const std::map<std::string, MakeDrafter> drafters = {
      {"early-exit", [] { return std::make_unique<EarlyExitDrafter>(kLayers, 2, "layer copy"); }},
      {"lookup+skip",
       [] {
         std::vector<std::unique_ptr<DraftSource>> sources;
         sources.push_back(make_lookup_source({}));
         return std::make_unique<SourcedDrafter>(std::move(sources), skip_drafter());
       }},
      // Lookups grafted onto the skip draft: a chain-configured request verifies a tree.
      {"lookup-tree+skip",
       [] {
         std::vector<std::unique_ptr<DraftSource>> sources;
         sources.push_back(make_lookup_source({}));
         return std::make_unique<SourcedDrafter>(std::move(sources), skip_drafter(),
                                                 SourcedDrafterOptions{.tree = true});
       }},
      {"swift",
       [] {
         SwiftOptions options;
         options.window = 8;
         options.min_window = 4;
         return std::make_unique<SwiftDrafter>(kLayers, options);
       }},
      {"asd", [] { return std::make_unique<CosineSkipDrafter>(kLayers, AsdParams{}); }},
  };
  for (const auto& [name, make] : drafters) {
    Case c;
    c.drafter = make;
    c.controller = controller("fixed", 3);
    expect_equal_to_alone(*model_, comm_, c, 4, 512, true, name);
  }
}

// Feature-head draft forwards run one sequence at a time (each over its own rows and slots) between
// the batch's shared verifications; every request's tokens stay its tokens alone.
TEST_F(SpeculativeBatchTest, FeatureHeadDraftsBatchLosslessly) {
  attach_feature_head(*model_, dir_.path(), 4);
  const std::int64_t hidden = model_->config().hidden_size;
  for (const char* tree : {"none", "1:3"}) {
    for (const bool sampled : {false, true}) {
      Case c;
      c.drafter = [hidden] {
        return std::make_unique<FeatureHeadDrafter>(kLayers, hidden, "seeded head");
      };
      c.controller = controller("fixed", 3);
      c.tree = tree;
      const auto [drafted, accepted] =
          expect_equal_to_alone(*model_, comm_, c, 4, 512, sampled,
                                std::string("feature head ") + tree + (sampled ? " sampled" : ""));
      EXPECT_GT(drafted, 0) << tree;
    }
  }
}

// Goodput sizing caps drafts by the load; greedy tokens stay those of each request alone.
TEST_F(SpeculativeBatchTest, GoodputSizedDraftsKeepGreedyTokens) {
  for (const char* kind : {"fixed", "thompson"}) {
    for (const char* tree : {"none", "1:3"}) {
      Case c;
      c.controller = controller(kind, 6);
      c.tree = tree;
      c.goodput = true;
      const auto [drafted, accepted] = expect_equal_to_alone(
          *model_, comm_, c, 5, 512, false, std::string("goodput ") + kind + " " + tree, 13);
      EXPECT_GT(drafted, 0) << kind;
    }
  }
}

TEST_F(SpeculativeBatchTest, RequestsArrivingWhileOthersRunJoinBetweenPasses) {
  Case c;
  c.controller = controller("thompson", 4);
  const auto requests = requests_for(model_->config().vocab_size, 9, c, true);
  std::int64_t calls = 0;
  int idle_calls = 0;
  // One more request every third pass; while idle, the next one at once.
  const BatchOutcome outcome =
      run_batch(*model_, comm_, requests, c, 4, 512, [&](bool idle) -> std::int64_t {
        idle_calls += idle ? 1 : 0;
        ++calls;
        return idle ? (calls + 2) / 3 + 1 : (calls + 2) / 3;
      });
  ASSERT_EQ(outcome.results.size(), requests.size());
  for (std::size_t r = 0; r < requests.size(); ++r) {
    EXPECT_EQ(outcome.results.at(static_cast<std::int64_t>(r)).tokens,
              decode_alone(*model_, comm_, requests[r], c).tokens)
        << "request " << r;
  }
  EXPECT_GT(outcome.stats.max_sequences, 1);
}

// A server's feed: requests reach it over time under ids of its own; some ask to stop early.
class ScriptedFeed final : public RequestFeed {
 public:
  ScriptedFeed(std::vector<SpeculativeRequest> requests, std::vector<std::int64_t> ids)
      : requests_(std::move(requests)), ids_(std::move(ids)) {}

  std::optional<std::vector<FeedArrival>> next(std::int64_t room, bool idle) override {
    ++calls_;
    if (next_ == requests_.size()) return std::nullopt;
    rooms_.push_back(room);
    std::vector<FeedArrival> arrivals;
    // One request every other call (several when idle, none on some calls).
    const std::size_t want = idle ? 2 : (calls_ % 2 == 0 ? 1 : 0);
    while (next_ < requests_.size() && arrivals.size() < want &&
           static_cast<std::int64_t>(arrivals.size()) < room) {
      arrivals.push_back({ids_[next_], requests_[next_]});
      ++next_;
    }
    return arrivals;
  }

  const std::vector<std::int64_t>& rooms() const { return rooms_; }

 private:
  std::vector<SpeculativeRequest> requests_;
  std::vector<std::int64_t> ids_;
  std::size_t next_ = 0;
  int calls_ = 0;
  std::vector<std::int64_t> rooms_;
};

TEST_F(SpeculativeBatchTest, AFeedsRequestsJoinUnderItsIdsAndStopWhenInterrupted) {
  Case c;
  c.controller = controller("adaptive", 4);
  std::vector<SpeculativeRequest> requests = requests_for(model_->config().vocab_size, 7, c, true);
  const std::vector<std::int64_t> ids = {40, 7, 12, 1000, 3, 8, 9};
  // Request 1000 (index 3) is stopped after 4 tokens, as a server stops a cancelled request.
  std::map<std::int64_t, std::int64_t> streamed_count;
  requests[3].options.max_new_tokens = 20;
  requests[3].options.interrupt = [&streamed_count] { return streamed_count[1000] >= 4 ? 15 : 0; };
  ScriptedFeed feed(requests, ids);
  SpeculativeBatchOptions options;
  options.batch = 3;
  options.capacity = 64;
  SpeculativeBatch batch(*model_, comm_, options, [&](std::int64_t id) {
    EXPECT_TRUE(std::find(ids.begin(), ids.end(), id) != ids.end()) << id;
    return SequenceSpeculators{c.drafter(), make_draft_length_controller(c.controller)};
  });
  std::map<std::int64_t, GenerationResult> results;
  SpeculativeBatch::Hooks hooks;
  hooks.on_token = [&](std::int64_t id, std::int32_t) { ++streamed_count[id]; };
  hooks.on_done = [&](std::int64_t id, GenerationResult&& result) {
    EXPECT_FALSE(results.contains(id));
    results[id] = std::move(result);
  };
  batch.serve(feed, hooks);
  ASSERT_EQ(results.size(), requests.size());
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const GenerationResult& got = results.at(ids[r]);
    SpeculativeRequest alone_request = requests[r];
    alone_request.options.interrupt = {};
    const GenerationResult alone = decode_alone(*model_, comm_, alone_request, c);
    if (r == 3) {
      // Stopped after the round that reached 4 tokens: a prefix of its full run.
      EXPECT_EQ(got.interrupt_signal, 15);
      ASSERT_GE(got.tokens.size(), 4u);
      EXPECT_LT(got.tokens.size(), alone.tokens.size());
      EXPECT_TRUE(std::equal(got.tokens.begin(), got.tokens.end(), alone.tokens.begin()));
    } else {
      EXPECT_EQ(got.tokens, alone.tokens) << "request id " << ids[r];
    }
  }
  for (const std::int64_t room : feed.rooms()) {
    EXPECT_GE(room, 1);
    EXPECT_LE(room, 3);
  }
  EXPECT_GT(batch.stats().max_sequences, 1);
}

TEST_F(SpeculativeBatchTest, ServingRefusesAMissingCapacityAndARequestBeyondIt) {
  Case c;
  std::vector<SpeculativeRequest> requests = requests_for(model_->config().vocab_size, 2, c, false);
  SpeculativeBatchOptions options;
  options.batch = 2;
  auto make = [&](std::int64_t) {
    return SequenceSpeculators{c.drafter(), make_draft_length_controller(c.controller)};
  };
  {
    ScriptedFeed feed(requests, {1, 2});
    SpeculativeBatch batch(*model_, comm_, options, make);
    EXPECT_THAT([&] { batch.serve(feed, {}); },
                ::testing::ThrowsMessage<Error>(::testing::HasSubstr("KV capacity")));
  }
  options.capacity = 8;
  requests[0].options.max_new_tokens = 3;  // 4 prompt tokens + 3 fit; the second does not
  requests[1].options.max_new_tokens = 30;
  ScriptedFeed feed(requests, {1, 2});
  SpeculativeBatch batch(*model_, comm_, options, make);
  EXPECT_THAT([&] { batch.serve(feed, {}); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("request 2: its prompt")));
}

TEST_F(SpeculativeBatchTest, RefusesBadOptionsAndRequestsBeforeAnyForward) {
  const auto maker = [](std::int64_t) {
    return SequenceSpeculators{skip_drafter(),
                               make_draft_length_controller(controller("fixed", 2))};
  };
  SpeculativeBatchOptions options;
  options.batch = 0;
  EXPECT_THAT([&] { SpeculativeBatch(*model_, comm_, options, maker); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("at least 1")));
  options.batch = 2;
  options.pass_tokens = 16;
  EXPECT_THAT([&] { SpeculativeBatch(*model_, comm_, options, maker); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("cannot verify a draft")));
  options.pass_tokens = 512;
  options.capacity = 20;
  SpeculativeBatch loop(*model_, comm_, options, maker);
  std::vector<SpeculativeRequest> requests(2);
  requests[0].prompt = {1, 2, 3};
  requests[0].options.max_new_tokens = 5;
  requests[1].prompt = std::vector<std::int32_t>(15, 4);
  requests[1].options.max_new_tokens = 6;
  EXPECT_THAT([&] { loop.run(requests, {}); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  "request 1: its prompt (15 tokens) and max_new_tokens (6) exceed")));
  requests[1].prompt.clear();
  EXPECT_THAT(
      [&] { loop.run(requests, {}); },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr("request 1: the prompt is empty")));
  requests.pop_back();
  SpeculativeBatch without(*model_, comm_, options, {});
  EXPECT_THAT([&] { without.run(requests, {}); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("without drafters")));
  EXPECT_EQ(loop.stats().passes, 0);
}

// A drafter that fails in the middle of a request's rounds: the error comes out of run() with
// its message, the other requests' suspended runs are unwound (no leak, no hang), and the batch
// runs again afterwards.
class FailingDrafter final : public Drafter {
 public:
  explicit FailingDrafter(int fail_at) : fail_at_(fail_at) {}
  std::string_view name() const override { return "failing"; }
  DraftPlan next_plan() override {
    SELFSPEC_CHECK(++plans_ < fail_at_, "drafter failed at round {}", plans_);
    return {LayerPlan::skipping(kLayers, std::vector<int>{1}, std::vector<int>{2})};
  }

 private:
  int fail_at_;
  int plans_ = 0;
};

TEST_F(SpeculativeBatchTest, AFailingRequestEndsTheRunWithItsErrorAndNothingElseBreaks) {
  Case c;
  c.controller = controller("fixed", 2);
  const auto requests = requests_for(model_->config().vocab_size, 6, c, false);
  SpeculativeBatchOptions options;
  options.batch = 4;
  SpeculativeBatch loop(*model_, comm_, options, [&](std::int64_t request) {
    return SequenceSpeculators{std::make_unique<FailingDrafter>(request == 1 ? 3 : 1000),
                               make_draft_length_controller(c.controller)};
  });
  EXPECT_THAT([&] { loop.run(requests, {}); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("drafter failed at round 3")));
  SpeculativeBatch again(*model_, comm_, options, [&](std::int64_t) {
    return SequenceSpeculators{skip_drafter(), make_draft_length_controller(c.controller)};
  });
  int done = 0;
  SpeculativeBatch::Hooks hooks;
  hooks.on_done = [&](std::int64_t, GenerationResult&&) { ++done; };
  again.run(requests, hooks);
  EXPECT_EQ(done, static_cast<int>(requests.size()));
}

TEST(SpeculativeBatchTensorParallel, GreedyAndSampledTokensEqualAloneAtTp2) {
  TempDir dir;
  write_tiny_checkpoint(tensor_parallel_tiny_spec(2), dir.path());
  run_model_ranks_in_both_orders(2, dir.path(), [&](LlamaModel& model, ThreadComm& comm) {
    Case c;
    c.drafter = [&] {
      return std::make_unique<LayerSkipDrafter>(
          LayerPlan::skipping(static_cast<int>(model.config().num_layers), std::vector<int>{1},
                              std::vector<int>{0}),
          "tp");
    };
    c.controller = controller("thompson", 4);
    for (const char* tree : {"none", "1:3"}) {
      c.tree = tree;
      expect_equal_to_alone(model, comm, c, 3, 512, true, std::string("TP 2 ") + tree, 7);
    }
  });
}

}  // namespace
}  // namespace selfspec::testing
