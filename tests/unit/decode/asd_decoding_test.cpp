// Draft on the Fly (--spec asd) in the decoding loop on one rank:
//  * the attention cosines the drafter measures through the prefill observer equal the ones
//    computed directly from the double-precision reference model's residual stream;
//  * greedy output is token-identical to plain decoding whatever skip set the rules choose;
//  * a prompt prefilled in chunks of any size gives bit-identical cosines and the same plan;
//  * one drafter serving several requests decides for each as a fresh one would.
#include "comm/local_comm.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/decoder.hpp"
#include "draft/attention_cosine.hpp"
#include "draft/cosine_skip_drafter.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/reference_llama.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "tests/support/tiny_models.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace selfspec::testing {
namespace {

constexpr int kLayers = 6;

class AsdDecoding : public ::testing::Test {
 protected:
  void SetUp() override {
    reference_ = write_tiny_checkpoint(speculative_tiny_spec(kLayers), dir_.path());
    model_ = load_model(dir_.path(), comm_);
  }

  std::vector<std::int32_t> autoregressive(const std::vector<std::int32_t>& prompt,
                                           const GenerationOptions& options) {
    KvCache kv =
        model_->make_kv_cache(static_cast<std::int64_t>(prompt.size()) + options.max_new_tokens);
    return Decoder(*model_, comm_).generate(prompt, options, kv).tokens;
  }

  GenerationResult speculative(CosineSkipDrafter& drafter, const std::vector<std::int32_t>& prompt,
                               const GenerationOptions& options,
                               const std::string& kind = "fixed") {
    KvCache kv =
        model_->make_kv_cache(static_cast<std::int64_t>(prompt.size()) + options.max_new_tokens);
    ControllerOptions controller_options;
    controller_options.kind = kind;
    controller_options.max_draft = 4;
    auto controller = make_draft_length_controller(controller_options);
    return Decoder(*model_, comm_, drafter, *controller).generate(prompt, options, kv);
  }

  // C_l from the reference model: its residual stream in double, cosines in double.
  std::vector<double> reference_acs(const std::vector<std::int32_t>& prompt) const {
    std::vector<double> sums(kLayers, 0.0);
    std::vector<std::vector<double>> before;
    reference_forward(reference_, prompt, {},
                      [&](int layer, bool after, const std::vector<std::vector<double>>& x) {
                        if (!after) {
                          before = x;
                          return;
                        }
                        for (std::size_t t = 0; t < x.size(); ++t) {
                          double dot = 0, xx = 0, yy = 0;
                          for (std::size_t i = 0; i < x[t].size(); ++i) {
                            dot += before[t][i] * x[t][i];
                            xx += before[t][i] * before[t][i];
                            yy += x[t][i] * x[t][i];
                          }
                          sums[static_cast<std::size_t>(layer)] +=
                              dot / std::sqrt(xx) / std::sqrt(yy);
                        }
                      });
    for (double& s : sums) s /= static_cast<double>(prompt.size());
    return sums;
  }

  TempDir dir_;
  LocalComm comm_;
  ReferenceWeights reference_;
  std::unique_ptr<LlamaModel> model_;
  const std::vector<std::int32_t> prompt_ = {1, 14, 3, 27, 9, 40, 33, 5, 18, 52, 7, 21};
};

GenerationOptions greedy(std::int64_t tokens, std::int64_t chunk = 512) {
  GenerationOptions options;
  options.max_new_tokens = tokens;
  options.ignore_eos = true;
  options.prefill_chunk = chunk;
  return options;
}

TEST_F(AsdDecoding, ObservedCosinesEqualTheReferenceModelsResidualStream) {
  CosineSkipDrafter drafter(kLayers, AsdParams{});
  speculative(drafter, prompt_, greedy(4));
  drafter.next_plan().layers;
  const std::vector<double> expected = reference_acs(prompt_);
  ASSERT_EQ(drafter.acs().size(), expected.size());
  for (std::size_t l = 0; l < expected.size(); ++l) {
    EXPECT_NEAR(drafter.acs()[l], expected[l], 1e-5) << "layer " << l;
  }
}

TEST_F(AsdDecoding, GreedyOutputIsTokenIdenticalToPlainDecoding) {
  const std::vector<std::int32_t> expected = autoregressive(prompt_, greedy(40));
  // Thresholds around this model's own cosines, so the rules choose small and large sets.
  CosineSkipDrafter probe(kLayers, AsdParams{});
  speculative(probe, prompt_, greedy(1));
  probe.next_plan().layers;
  std::vector<double> sorted = probe.acs();
  std::sort(sorted.begin(), sorted.end());
  const std::vector<AsdParams> settings = {
      AsdParams{},                                 // Table 2
      AsdParams{sorted[kLayers / 2], 3, 1},        // about half the attention sublayers
      AsdParams{std::max(sorted[0], 0.01), 2, 0},  // every attention, every 2nd MLP
  };
  for (const AsdParams& params : settings) {
    for (const char* kind : {"fixed", "adaptive"}) {
      CosineSkipDrafter drafter(kLayers, params);
      const GenerationResult r = speculative(drafter, prompt_, greedy(40), kind);
      EXPECT_EQ(r.tokens, expected)
          << "alpha " << params.alpha << " m " << params.m << " n " << params.n << " / " << kind;
      EXPECT_GT(r.stats.drafted, 0);
    }
  }
  CosineSkipDrafter widest(kLayers, settings.back());
  speculative(widest, prompt_, greedy(2));
  // Rule 1 alone (m = 2) takes both sublayers of layers 1, 3, 5; the threshold adds attention.
  EXPECT_GT(widest.next_plan().layers.skipped_count(), 2 * (kLayers / 2));
}

TEST_F(AsdDecoding, ChunkedPrefillGivesTheSameCosinesAndPlan) {
  CosineSkipDrafter whole(kLayers, AsdParams{0.5, 3, 1});
  const GenerationResult expected = speculative(whole, prompt_, greedy(16));
  const LayerPlan plan = whole.next_plan().layers;
  for (std::int64_t chunk : {1, 2, 5, 11}) {
    CosineSkipDrafter chunked(kLayers, AsdParams{0.5, 3, 1});
    const GenerationResult r = speculative(chunked, prompt_, greedy(16, chunk));
    EXPECT_EQ(chunked.acs(), whole.acs()) << "chunk " << chunk;  // bit for bit
    EXPECT_EQ(chunked.next_plan().layers, plan) << "chunk " << chunk;
    EXPECT_EQ(r.tokens, expected.tokens) << "chunk " << chunk;
  }
}

TEST_F(AsdDecoding, OneDrafterDecidesForEachRequestAsAFreshOneWould) {
  const std::vector<std::int32_t> other = {2, 8, 60, 44, 13};
  CosineSkipDrafter reused(kLayers, AsdParams{0.5, 3, 1});
  for (const auto& prompt : {prompt_, other, prompt_}) {
    const GenerationResult r = speculative(reused, prompt, greedy(8));
    CosineSkipDrafter fresh(kLayers, AsdParams{0.5, 3, 1});
    const GenerationResult f = speculative(fresh, prompt, greedy(8));
    EXPECT_EQ(reused.acs(), fresh.acs());
    EXPECT_EQ(reused.next_plan().layers, fresh.next_plan().layers);
    EXPECT_EQ(r.tokens, f.tokens);
    EXPECT_EQ(reused.state()["prompt_tokens"], static_cast<std::int64_t>(prompt.size()));
  }
}

}  // namespace
}  // namespace selfspec::testing
