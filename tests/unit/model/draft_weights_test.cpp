// The model drafting as itself in fewer bits (llama_weights.hpp's DraftWeights,
// LlamaModel::attach_draft_weights): a forward with ForwardArgs::draft_weights equals, bit for
// bit, the forward of a model whose layers and output projection are the quantized copy and whose
// embedding is the target's (under both reduction orders, with a skip plan too); it differs from
// the target's forward (the copy is real) but stays close; attaching the copy leaves the target's
// forward unchanged; and a draft-weights forward without a copy is an error.
#include "model/llama_weights.hpp"

#include "model_io/safetensors.hpp"
#include "model_io/tensor_source.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include "comm/local_comm.hpp"
#include "core/error.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace selfspec::testing {
namespace {

class DraftWeightsTest : public ::testing::TestWithParam<WeightFormat> {
 protected:
  void SetUp() override {
    // Hidden, head_dim and intermediate in whole blocks of 32, and so are the tp-invariant
    // reduction's chunks (one per query head: 4 of 32 intermediate features); the K formats fall
    // back to q8_0 here (128 columns are not a super-block). Tied embeddings, as in Qwen2.5 and
    // SmolLM2.
    TinyModelSpec spec;
    spec.layers = 3;
    spec.hidden = 128;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.intermediate = 128;
    spec.vocab = 70;
    spec.tie = true;
    spec.scale = 1.5;
    write_tiny_checkpoint(spec, dir_.path());
    config_ = tiny_config(spec);
    shard_ = ShardPlan::make(config_, 1, 0);
  }

  DraftWeights draft_copy() const {
    const Checkpoint checkpoint = Checkpoint::open(dir_.path());
    return load_draft_weights(CheckpointSource(checkpoint), config_, shard_, GetParam(),
                              cpu_backend());
  }

  // The quantized model the draft is: the target's embedding, the copy's layers and output.
  std::unique_ptr<LlamaModel> reference_model() {
    const Checkpoint checkpoint = Checkpoint::open(dir_.path());
    LlamaWeights weights = LlamaWeights::load(CheckpointSource(checkpoint), config_, shard_,
                                              std::nullopt, cpu_backend());
    DraftWeights draft = draft_copy();
    weights.layers = std::move(draft.layers);
    weights.lm_head = std::move(draft.output);
    weights.tied = false;
    return std::make_unique<LlamaModel>(config_, shard_, std::move(weights), comm_, cpu_backend());
  }

  std::vector<float> logits(LlamaModel& model, bool draft_weights, const LayerPlan* plan) {
    KvCache kv = model.make_kv_cache(32);
    std::vector<std::int32_t> rows(tokens_.size());
    std::vector<std::int32_t> positions(tokens_.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      rows[i] = static_cast<std::int32_t>(i);
      positions[i] = static_cast<std::int32_t>(i);
    }
    ForwardArgs args;
    args.tokens = tokens_;
    args.positions = positions;
    args.logit_rows = rows;
    args.draft.plan = plan;
    args.draft.draft_weights = draft_weights;
    std::vector<float> out;
    model.forward(args, kv, out);
    return out;
  }

  TempDir dir_{"draft-weights"};
  LocalComm comm_;
  ModelConfig config_;
  ShardPlan shard_;
  const std::vector<std::int32_t> tokens_ = {1, 17, 4, 60, 23, 5, 41, 9};
};

TEST_P(DraftWeightsTest, DraftForwardsAreTheQuantizedModelsForwards) {
  const LayerPlan skipping = LayerPlan::skipping(3, std::vector<int>{1}, std::vector<int>{2});
  for (const ReductionOrder order : {ReductionOrder::kRankOrder, ReductionOrder::kTpInvariant}) {
    SCOPED_TRACE(order == ReductionOrder::kRankOrder ? "rank-order" : "tp-invariant");
    std::unique_ptr<LlamaModel> model = load_model(dir_.path(), comm_);
    model->attach_draft_weights(draft_copy());
    model->set_reduction_order(order);
    std::unique_ptr<LlamaModel> reference = reference_model();
    reference->set_reduction_order(order);
    for (const LayerPlan* plan : {static_cast<const LayerPlan*>(nullptr), &skipping}) {
      EXPECT_TRUE(bit_identical(logits(*model, true, plan), logits(*reference, false, plan)))
          << (plan == nullptr ? "full plan" : "skipping plan");
    }
  }
}

TEST_P(DraftWeightsTest, TheCopyIsRealCloseAndLeavesTheTargetAlone) {
  std::unique_ptr<LlamaModel> plain = load_model(dir_.path(), comm_);
  std::unique_ptr<LlamaModel> model = load_model(dir_.path(), comm_);
  model->attach_draft_weights(draft_copy());
  const std::vector<float> target = logits(*plain, false, nullptr);
  EXPECT_TRUE(bit_identical(logits(*model, false, nullptr), target));
  const std::vector<float> draft = logits(*model, true, nullptr);
  EXPECT_FALSE(bit_identical(draft, target));
  const std::vector<double> reference(target.begin(), target.end());
  // 4 bits move a tiny random model's logits far more than 8 (q4_k falls back to q8_0 here).
  EXPECT_LT(relative_max_error(draft, reference), GetParam() == WeightFormat::kQ4_0 ? 0.5 : 0.05);
  ASSERT_NE(model->draft_weights(), nullptr);
  EXPECT_EQ(model->draft_weights()->format, GetParam());
  EXPECT_LT(model->draft_weights()->bytes(), model->weights().bytes());
}

INSTANTIATE_TEST_SUITE_P(Formats, DraftWeightsTest,
                         ::testing::Values(WeightFormat::kQ8_0, WeightFormat::kQ4_0,
                                           WeightFormat::kQ4_K, WeightFormat::kBF16),
                         [](const ::testing::TestParamInfo<WeightFormat>& format) {
                           return std::string(weight_format_name(format.param));
                         });

TEST(DraftWeights, AForwardOnDraftWeightsNeedsThemAttached) {
  TempDir dir("draft-weights-none");
  LocalComm comm;
  TinyModelSpec spec;
  write_tiny_checkpoint(spec, dir.path());
  std::unique_ptr<LlamaModel> model = load_model(dir.path(), comm);
  KvCache kv = model->make_kv_cache(8);
  const std::int32_t token = 3, position = 0, row = 0;
  ForwardArgs args;
  args.tokens = {&token, 1};
  args.positions = {&position, 1};
  args.logit_rows = {&row, 1};
  args.draft.draft_weights = true;
  std::vector<float> out;
  try {
    model->forward(args, kv, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--draft-weights"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace selfspec::testing
