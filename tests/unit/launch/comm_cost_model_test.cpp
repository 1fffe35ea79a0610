// The decode cost model of `plan --comm-table` (launch/plan/comm_cost_model.hpp):
//  * the expected tokens per round, E = (1 − α^(K+1)) / (1 − α);
//  * a two-layer geometry priced by hand: weight time, collectives per step, per-token plain and
//    self-speculative latency, speedup, communication share;
//  * the collectives it counts are the ones the code issues: LlamaModel::forward over a counting
//    communicator (two thread ranks), for the full plan and a skip plan, one token and several;
//    and whole Decoder::generate runs, plain and self-speculative, in both logits modes;
//  * per-sublayer weight bytes add up to a full forward's (RankMemory::decode_weight_bytes).
#include "launch/plan/comm_cost_model.hpp"
#include "backend/backend.hpp"
#include "backend/logit_statistics.hpp"
#include "comm/comm_table.hpp"
#include "control/draft_length_controller.hpp"
#include "core/error.hpp"
#include "decode/control_message.hpp"
#include "decode/decoder.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "launch/rank_plan.hpp"
#include "model_io/architecture_file.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/thread_comm.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <map>
#include <mutex>
#include <utility>

namespace selfspec::launch {
namespace {

TEST(CostModel, ExpectedTokensPerRound) {
  EXPECT_DOUBLE_EQ(expected_tokens_per_round(0.0, 4), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens_per_round(1.0, 4), 5.0);
  EXPECT_DOUBLE_EQ(expected_tokens_per_round(0.5, 2), 1.75);  // 1 + 0.5 + 0.25
  EXPECT_NEAR(expected_tokens_per_round(0.8, 4), 1 + 0.8 + 0.64 + 0.512 + 0.4096, 1e-12);
  EXPECT_DOUBLE_EQ(expected_tokens_per_round(0.9, 0), 1.0);
  EXPECT_THROW(expected_tokens_per_round(1.2, 4), Error);
  EXPECT_THROW(expected_tokens_per_round(0.5, -1), Error);
}

// Two layers, hidden 4 (an all-reduce of T tokens carries 16·T bytes), TP 2; a full forward reads
// 1000 bytes, a layer's attention 200 and its MLP 100; memory 1000 B/s.
DecodeGeometry two_layer_geometry() {
  DecodeGeometry g;
  g.config.num_layers = 2;
  g.config.hidden_size = 4;
  g.tp = 2;
  g.forward_weight_bytes = 1000;
  g.layers.assign(static_cast<std::size_t>(g.config.num_layers), LayerWeightBytes{200, 100});
  g.vocab_shard = 10;
  return g;
}

// all_reduce: 1 ms + bytes / (16 kB/s); gather 0.5 ms; broadcast 0.2 ms (no size dependence).
CommTable hand_table() {
  return parse_comm_table_yaml(R"(
ops:
  all_reduce: {fit: {latency_s: 1.0e-3, bandwidth_bytes_per_s: 16000}}
  gather: {fit: {latency_s: 5.0e-4}}
  broadcast: {fit: {latency_s: 2.0e-4}}
)",
                               "hand.yaml");
}

TEST(CostModel, TwoLayerGeometryPricedByHand) {
  CostModelOptions options;
  options.memory_bytes_per_s = 1000.0;
  options.alpha = 0.5;
  options.draft_len = 2;
  options.logits = LogitsMode::kLocal;
  options.draft_plan = LayerPlan::skipping(2, std::vector<int>{0}, std::vector<int>{1});
  const CostPrediction p = predict_decode_cost(two_layer_geometry(), hand_table(), options);

  // plain: 1000 B / 1000 B/s = 1 s; 1 + 2·2 = 5 all-reduces of 16 B at 1 ms + 16/16000 s = 2 ms;
  // one gather (0.5 ms), one broadcast (0.2 ms).
  EXPECT_DOUBLE_EQ(p.plain.weight_s, 1.0);
  ASSERT_EQ(p.plain.collectives.size(), 3u);
  EXPECT_EQ(p.plain.collectives[0].calls, (CollectiveCalls{Collective::kAllReduce, 16, 5}));
  EXPECT_EQ(p.plain.collectives[1].calls,
            (CollectiveCalls{Collective::kGather, sizeof(ShardStats), 1}));
  EXPECT_EQ(p.plain.collectives[2].calls,
            (CollectiveCalls{Collective::kBroadcast, sizeof(ControlMessage), 1}));
  EXPECT_NEAR(p.plain.comm_s, 5 * 2e-3 + 5e-4 + 2e-4, 1e-15);
  // draft: skips attention 0 and MLP 1: reads 1000 - 300 bytes, 1 + 2 all-reduces.
  EXPECT_EQ(p.draft.weight_bytes, 700u);
  EXPECT_EQ(p.draft.collectives[0].calls.count, 3);
  EXPECT_NEAR(p.draft.total_s(), 0.7 + 3 * 2e-3 + 7e-4, 1e-12);
  // verify: K + 1 = 3 tokens: all-reduces of 48 B (1 ms + 3 ms), a gather of 3 records.
  EXPECT_EQ(p.verify.tokens, 3);
  EXPECT_EQ(p.verify.collectives[0].calls, (CollectiveCalls{Collective::kAllReduce, 48, 5}));
  EXPECT_EQ(p.verify.collectives[1].calls.bytes, 3 * sizeof(ShardStats));
  EXPECT_NEAR(p.verify.total_s(), 1.0 + 5 * 4e-3 + 7e-4, 1e-12);
  // E = 1.75; per token (2 · t_draft + t_verify) / E.
  const double plain = 1.0 + 0.0107;
  const double spec = (2 * 0.7067 + 1.0207) / 1.75;
  EXPECT_DOUBLE_EQ(p.expected_tokens, 1.75);
  EXPECT_NEAR(p.plain_per_token_s, plain, 1e-12);
  EXPECT_NEAR(p.spec_per_token_s, spec, 1e-12);
  EXPECT_NEAR(p.speedup, plain / spec, 1e-12);
  EXPECT_NEAR(p.plain_comm_fraction, 0.0107 / plain, 1e-12);
  EXPECT_NEAR(p.spec_comm_fraction, (2 * 0.0067 + 0.0207) / (2 * 0.7067 + 1.0207), 1e-12);
}

TEST(CostModel, GatherModeAndMissingOpsFallBackToAllReduce) {
  CommTable table = hand_table();
  table.ops.erase("gather");
  const StepCost step = price_step("plain", two_layer_geometry(), LayerPlan::full(2), 2,
                                   LogitsMode::kGather, table, 1000.0);
  // 2 rows x 10 floats per rank, priced as an all-reduce of 80 B: 1 ms + 5 ms.
  EXPECT_EQ(step.collectives[1].calls, (CollectiveCalls{Collective::kGather, 80, 1}));
  EXPECT_EQ(step.collectives[1].priced_as, "all_reduce");
  EXPECT_NEAR(step.collectives[1].seconds_each, 1e-3 + 80.0 / 16000, 1e-15);
  EXPECT_EQ(step.collectives[2].priced_as, "broadcast");
}

TEST(CostModel, NothingCrossesRanksAtTp1) {
  ModelConfig config;
  config.num_layers = 3;
  config.hidden_size = 8;
  EXPECT_TRUE(step_collectives(config, 1, LayerPlan::full(3), 4, LogitsMode::kGather, 100).empty());
}

TEST(CostModel, RefusesBadOptions) {
  CostModelOptions options;
  options.memory_bytes_per_s = 1000.0;
  options.draft_plan = LayerPlan::full(2);
  options.draft_len = 0;
  EXPECT_THROW(predict_decode_cost(two_layer_geometry(), hand_table(), options), Error);
  options.draft_len = 2;
  options.memory_bytes_per_s = 0.0;
  EXPECT_THROW(predict_decode_cost(two_layer_geometry(), hand_table(), options), Error);
}

TEST(CostModel, SublayerBytesAddUpToAFullForward) {
  const ModelConfig config = load_architecture_file(std::filesystem::path(SELFSPEC_SOURCE_DIR) /
                                                    "configs/models/llama-2-70b.yaml")
                                 .config;
  const std::vector<RankPlan> ranks = plan_ranks(config, 8, uniform_format(DType::kBF16), 4096);
  const DecodeGeometry g = decode_geometry(config, ranks, uniform_format(DType::kBF16));
  const std::uint64_t hidden = 8192;
  const std::uint64_t head = 4000 * hidden * 2 + hidden * 4;  // LM head shard (bf16), final norm
  EXPECT_EQ(g.forward_weight_bytes, 80 * (g.layers[0].attention + g.layers[0].mlp) + head);
  EXPECT_EQ(g.vocab_shard, 4000);
  // Attention per rank: 8 query heads, 1 KV head of 128: (1024·8192·2 + 2·128·8192) bf16 + norm.
  EXPECT_EQ(g.layers[0].attention, (2 * 1024 * hidden + 2 * 128 * hidden) * 2 + hidden * 4);
  EXPECT_EQ(g.layers[0].mlp, 3 * 3584 * hidden * 2 + hidden * 4);
  const LayerPlan half = LayerPlan::skipping(80, std::vector<int>{1, 2}, std::vector<int>{3});
  EXPECT_EQ(forward_weight_bytes(g, half),
            g.forward_weight_bytes - 2 * g.layers[0].attention - g.layers[0].mlp);
}

// A --draft-weights copy: each rank holds it beside the weights (plan_ranks), and draft forwards
// read it instead (decode_geometry), skip plans included; the copy's q4_0 blocks of 32 take
// 18 bytes (4.5 bits a weight) in the CPU backend's panels, against bf16's 16 bits.
TEST(CostModel, ADraftCopyIsHeldAndReadByDrafts) {
  const ModelConfig config = load_architecture_file(std::filesystem::path(SELFSPEC_SOURCE_DIR) /
                                                    "configs/models/llama-2-70b.yaml")
                                 .config;
  const WeightFormatOf bf16 = uniform_format(DType::kBF16);
  const std::vector<RankPlan> ranks =
      plan_ranks(config, 8, bf16, 4096, std::nullopt, 32, WeightFormat::kQ4_0);
  const std::uint64_t copy = ranks[0].draft_weight_bytes;
  EXPECT_EQ(copy, plan_draft_weight_bytes(config, ranks[0].shard, WeightFormat::kQ4_0));
  EXPECT_EQ(ranks[0].total_bytes(),
            ranks[0].memory.weight_bytes + copy + ranks[0].memory.kv_cache_bytes);
  const double ratio =
      static_cast<double>(copy) / static_cast<double>(ranks[0].memory.decode_weight_bytes);
  EXPECT_GT(ratio, 4.5 / 16 - 0.01);
  EXPECT_LT(ratio, 4.5 / 16 + 0.02);  // panel headers and padding
  const DecodeGeometry g = decode_geometry(config, ranks, bf16, WeightFormat::kQ4_0);
  const LayerPlan full = LayerPlan::full(80);
  EXPECT_EQ(forward_weight_bytes(g, full), g.forward_weight_bytes);
  EXPECT_EQ(forward_weight_bytes(g, full, /*draft=*/true), copy);
  const LayerPlan skip = LayerPlan::skipping(80, std::vector<int>{1}, std::vector<int>{2});
  EXPECT_EQ(forward_weight_bytes(g, skip, true),
            copy - g.draft_layers[1].attention - g.draft_layers[2].mlp);
  // Without a copy, drafts read the weights.
  const DecodeGeometry plain = decode_geometry(config, ranks, bf16);
  EXPECT_EQ(forward_weight_bytes(plain, skip, true), forward_weight_bytes(plain, skip));
}

// --- the counts against the code -------------------------------------------------------------

using CallCounts = std::map<std::pair<std::string, std::uint64_t>, std::int64_t>;

// Forwards every collective to `inner` and counts it by (op, bytes): the buffer of an all-reduce
// or broadcast, a rank's contribution to a gather or all-gather (named as in comm tables).
class CountingComm final : public Communicator {
 public:
  explicit CountingComm(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view name() const override { return "counting"; }
  void all_reduce_sum(std::span<float> data) override {
    count("all_reduce", data.size_bytes());
    inner_.all_reduce_sum(data);
  }
  void broadcast(std::span<std::byte> data, int root) override {
    count("broadcast", data.size());
    inner_.broadcast(data, root);
  }
  void gather(std::span<const float> send, std::span<float> recv,
              std::span<const std::int64_t> counts, int root) override {
    count("gather", send.size_bytes());
    inner_.gather(send, recv, counts, root);
  }
  void all_gather(std::span<const float> send, std::span<float> recv,
                  std::span<const std::int64_t> counts) override {
    count("all_gather", send.size_bytes());
    inner_.all_gather(send, recv, counts);
  }
  void gather_bytes(std::span<const std::byte> send, std::span<std::byte> recv, int root) override {
    count("gather", send.size());
    inner_.gather_bytes(send, recv, root);
  }
  void all_gather_u64(std::uint64_t value, std::span<std::uint64_t> values) override {
    count("all_gather_u64", sizeof value);
    inner_.all_gather_u64(value, values);
  }
  void barrier() override {
    count("barrier", 0);
    inner_.barrier();
  }

  const CallCounts& calls() const { return calls_; }
  void reset() { calls_.clear(); }

 private:
  void count(const char* op, std::size_t bytes) { ++calls_[{op, bytes}]; }
  Communicator& inner_;
  CallCounts calls_;
};

// Adds `times` × the model's calls to `counts`.
void add(CallCounts& counts, const std::vector<CollectiveCalls>& calls, std::int64_t times = 1) {
  for (const CollectiveCalls& c : calls) {
    counts[{std::string(collective_name(c.op)), c.bytes}] += c.count * times;
  }
}

class CollectiveCounts : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyModelSpec spec;
    spec.layers = 4;
    spec.hidden = 32;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.intermediate = 48;
    spec.vocab = 64;
    spec.scale = 2.0;
    testing::write_tiny_checkpoint(spec, dir_.path());
  }
  // Runs body(model, counting communicator) on two thread ranks, the model loaded over it. Each
  // rank has its own CPU backend: a backend holds the state of the forward it runs.
  void on_two_ranks(const std::function<void(LlamaModel&, CountingComm&)>& body) {
    testing::run_ranks(2, false, [&](testing::ThreadComm& ranks) {
      CountingComm counting(ranks);
      const std::unique_ptr<Backend> backend = make_cpu_backend();
      const std::unique_ptr<LlamaModel> model =
          testing::load_model_on(*backend, dir_.path(), counting);
      counting.reset();
      body(*model, counting);
    });
  }
  // Greedy decoding of exactly max_new_tokens tokens, logits in the given mode.
  static GenerationOptions generation_of(int max_new_tokens, LogitsMode mode) {
    GenerationOptions generation;
    generation.max_new_tokens = max_new_tokens;
    generation.ignore_eos = true;
    generation.logits = mode;
    return generation;
  }
  // A draft length fixed at k.
  static std::unique_ptr<DraftLengthController> fixed_draft_length(int k) {
    ControllerOptions fixed;
    fixed.kind = "fixed";
    fixed.max_draft = k;
    return make_draft_length_controller(fixed);
  }
  const LayerPlan skip_ = LayerPlan::skipping(4, std::vector<int>{1, 2}, std::vector<int>{2});
  const std::vector<std::int32_t> prompt_ = {1, 14, 3, 27, 9, 40};
  testing::TempDir dir_;
};

TEST_F(CollectiveCounts, ForwardAllReducesAreTheModelsForFullAndSkipPlans) {
  on_two_ranks([&](LlamaModel& model, CountingComm& comm) {
    for (const LayerPlan& plan : {LayerPlan::full(4), skip_}) {
      for (const std::vector<std::int32_t>& tokens :
           {std::vector<std::int32_t>{5}, std::vector<std::int32_t>{5, 6, 7}}) {
        KvCache kv = model.make_kv_cache(16);
        comm.reset();
        model.reset_counters();
        const std::vector<std::int32_t> rows = {0};
        testing::forward_rows(model, kv, tokens, rows, &plan);
        const auto t = static_cast<std::int64_t>(tokens.size());
        const std::vector<CollectiveCalls> predicted =
            forward_collectives(model.config(), 2, plan, t);
        CallCounts expected;
        add(expected, predicted);
        EXPECT_EQ(comm.calls(), expected) << plan.describe() << ", " << t << " token(s)";
        ASSERT_EQ(predicted.size(), 1u);
        EXPECT_EQ(model.counters().all_reduces, predicted[0].count) << plan.describe();
      }
    }
  });
}

// Every collective of a whole generate(): the prompt's forward, the first token's pick and
// broadcast, then the steps the cost model prices.
CallCounts prefill_and_first_token(const ModelConfig& config, std::int64_t prompt, LogitsMode mode,
                                   std::int64_t shard) {
  CallCounts counts;
  add(counts, forward_collectives(config, 2, LayerPlan::full(4), prompt));
  add(counts, logits_collectives(mode, 2, 1, shard));
  add(counts, control_collectives(2));
  return counts;
}

TEST_F(CollectiveCounts, PlainDecodingStepsAreTheModels) {
  for (const LogitsMode mode : {LogitsMode::kLocal, LogitsMode::kGather}) {
    on_two_ranks([&](LlamaModel& model, CountingComm& comm) {
      const GenerationOptions generation = generation_of(7, mode);
      KvCache kv = model.make_kv_cache(32);
      Decoder decoder(model, comm);
      const GenerationResult result = decoder.generate(prompt_, generation, kv);
      const std::int64_t shard = model.shard().vocab.size();
      CallCounts expected =
          prefill_and_first_token(model.config(), std::ssize(prompt_), mode, shard);
      add(expected, step_collectives(model.config(), 2, LayerPlan::full(4), 1, mode, shard),
          result.stats.verify_forwards);
      EXPECT_EQ(result.stats.verify_forwards, 6);
      EXPECT_EQ(comm.calls(), expected) << logits_mode_name(mode);
    });
  }
}

// A round of K = 1 draft under the skip plan (or none when the budget leaves no room), verified
// over the drafts + 1 tokens: any acceptance pattern.
TEST_F(CollectiveCounts, SelfSpeculativeRoundsAreTheModels) {
  for (const LogitsMode mode : {LogitsMode::kLocal, LogitsMode::kGather}) {
    on_two_ranks([&](LlamaModel& model, CountingComm& comm) {
      const GenerationOptions generation = generation_of(12, mode);
      KvCache kv = model.make_kv_cache(32);
      LayerSkipDrafter drafter(skip_, "test");
      const auto controller = fixed_draft_length(1);
      Decoder decoder(model, comm, drafter, *controller);
      const DecodingStats stats = decoder.generate(prompt_, generation, kv).stats;
      const std::int64_t shard = model.shard().vocab.size();
      const ModelConfig& config = model.config();
      CallCounts expected = prefill_and_first_token(config, std::ssize(prompt_), mode, shard);
      const LayerPlan full = LayerPlan::full(4);
      add(expected, step_collectives(config, 2, skip_, 1, mode, shard), stats.draft_forwards);
      add(expected, step_collectives(config, 2, full, 2, mode, shard), stats.drafted);
      add(expected, step_collectives(config, 2, full, 1, mode, shard),
          stats.verify_forwards - stats.drafted);
      EXPECT_GT(stats.drafted, 0);
      EXPECT_EQ(stats.draft_forwards, stats.drafted);
      EXPECT_EQ(comm.calls(), expected) << logits_mode_name(mode);
    });
  }
}

// K = 3 with a draft that skips nothing (every draft accepted) and a budget of whole rounds: every
// verification is over K + 1 = 4 tokens.
TEST_F(CollectiveCounts, FullRoundsVerifyKPlusOneTokens) {
  on_two_ranks([&](LlamaModel& model, CountingComm& comm) {
    const GenerationOptions generation = generation_of(1 + 3 * 4, LogitsMode::kLocal);
    KvCache kv = model.make_kv_cache(32);
    const LayerPlan full = LayerPlan::full(4);
    LayerSkipDrafter drafter(full, "none skipped");
    const auto controller = fixed_draft_length(3);
    Decoder decoder(model, comm, drafter, *controller);
    const DecodingStats stats = decoder.generate(prompt_, generation, kv).stats;
    ASSERT_EQ(stats.verify_forwards, 3);
    ASSERT_EQ(stats.draft_forwards, 9);
    const std::int64_t shard = model.shard().vocab.size();
    const ModelConfig& config = model.config();
    CallCounts expected =
        prefill_and_first_token(config, std::ssize(prompt_), LogitsMode::kLocal, shard);
    add(expected, step_collectives(config, 2, full, 1, LogitsMode::kLocal, shard), 9);
    add(expected, step_collectives(config, 2, full, 4, LogitsMode::kLocal, shard), 3);
    EXPECT_EQ(comm.calls(), expected);
  });
}

}  // namespace
}  // namespace selfspec::launch
