// Draft on the Fly (--spec asd) under `mpirun -np N`: every rank observes the prompt's prefill
// and measures the same attention cosines bit for bit (the residual stream is replicated), rank
// 0's plan reaches every rank in its control messages (--debug-sync checks that all ranks agree
// after every message), greedy output equals autoregressive output, and a chunked prefill gives
// the same plan and tokens.
#include "comm/mpi_comm.hpp"
#include "decode/decoder.hpp"
#include "draft/cosine_skip_drafter.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_models.hpp"

#include <gtest/gtest.h>

#include <array>

namespace selfspec::testing {
namespace {

constexpr int kLayers = 6;

class AsdTp : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path dir = write_tiny_checkpoint_on_root(
        tensor_parallel_tiny_spec(kLayers), comm_, dir_, "selfspec-asd-tp");
    model_ = load_model(dir, comm_);
  }

  GenerationResult speculative(CosineSkipDrafter& drafter, std::int64_t prefill_chunk = 512) {
    KvCache kv = model_->make_kv_cache(64);
    ControllerOptions controller_options;
    controller_options.kind = "fixed";
    controller_options.max_draft = 4;
    auto controller = make_draft_length_controller(controller_options);
    GenerationOptions options = generation();
    options.debug_sync = true;
    options.prefill_chunk = prefill_chunk;
    return Decoder(*model_, comm_, drafter, *controller).generate(prompt_, options, kv);
  }

  static GenerationOptions generation() {
    GenerationOptions options;
    options.max_new_tokens = 30;
    options.ignore_eos = true;
    return options;
  }

  MpiComm comm_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<LlamaModel> model_;
  const std::vector<std::int32_t> prompt_ = {1, 40, 7, 88, 23, 61, 5, 19, 72};
};

TEST_F(AsdTp, GreedyEqualsAutoregressiveAndEveryRankMeasuresTheSameCosines) {
  KvCache kv = model_->make_kv_cache(64);
  const std::vector<std::int32_t> expected =
      Decoder(*model_, comm_).generate(prompt_, generation(), kv).tokens;
  for (const AsdParams& params : {AsdParams{}, AsdParams{0.5, 3, 1}, AsdParams{0.01, 2, 0}}) {
    CosineSkipDrafter drafter(kLayers, params);
    const GenerationResult r = speculative(drafter);
    EXPECT_EQ(r.tokens, expected) << "alpha " << params.alpha << " / rank " << comm_.rank();
    EXPECT_GT(r.stats.drafted, 0);
    // Every rank observed the prefill: its cosines are rank 0's, bit for bit.
    const LayerPlan plan = drafter.next_plan().layers;
    std::array<double, kLayers> root{};
    std::copy(drafter.acs().begin(), drafter.acs().end(), root.begin());
    comm_.broadcast_object(root, 0);
    EXPECT_TRUE(std::equal(root.begin(), root.end(), drafter.acs().begin()))
        << "rank " << comm_.rank();
    EXPECT_GT(plan.skipped_count(), 0) << "rule 1 alone skips layer 2 or more";
  }
}

TEST_F(AsdTp, ChunkedPrefillGivesTheSamePlanAndTokens) {
  CosineSkipDrafter whole(kLayers, AsdParams{0.5, 3, 1});
  const GenerationResult expected = speculative(whole);
  for (std::int64_t chunk : {1, 4}) {
    CosineSkipDrafter chunked(kLayers, AsdParams{0.5, 3, 1});
    const GenerationResult r = speculative(chunked, chunk);
    EXPECT_EQ(r.tokens, expected.tokens) << "chunk " << chunk;
    EXPECT_EQ(chunked.next_plan().layers, whole.next_plan().layers) << "chunk " << chunk;
    EXPECT_EQ(chunked.acs(), whole.acs()) << "chunk " << chunk;
  }
}

}  // namespace
}  // namespace selfspec::testing
