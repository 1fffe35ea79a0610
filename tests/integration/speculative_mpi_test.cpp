// Self-speculative decoding under `mpirun -np N`: greedy output equals autoregressive output at
// this TP degree for several controllers and both logits modes; the gathering and the
// local-reduction logits access make identical decisions under sampling (same seed: same
// tokens, same acceptance counts); and --debug-sync turns a deliberately divergent rank into an
// error on every rank instead of a hang or silent garbage. A pruned draft vocabulary keeps all of
// that, including when some ranks' vocabulary shards hold no kept id at all (their draft logits
// are all -inf). Token trees keep greedy output and sample identically in both logits modes.
#include "comm/mpi_comm.hpp"
#include "core/error.hpp"
#include "decode/control_message.hpp"
#include "decode/decoder.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "model/draft_vocabulary.hpp"
#include "tests/support/forwarding_comm.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_models.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

namespace selfspec::testing {
namespace {

// A communicator that forwards to MPI but, on one rank, corrupts the token of the n-th control
// message it receives: a stand-in for a rank whose state silently diverged.
class DivergingComm final : public ForwardingComm {
 public:
  DivergingComm(Communicator& inner, int bad_rank, int bad_message)
      : ForwardingComm(inner), bad_rank_(bad_rank), bad_message_(bad_message) {}
  std::string_view name() const override { return "diverging"; }
  void broadcast(std::span<std::byte> data, int root) override {
    ForwardingComm::broadcast(data, root);
    if (data.size() == sizeof(ControlMessage) && messages_++ == bad_message_ &&
        rank() == bad_rank_) {
      ControlMessage message;
      std::memcpy(&message, data.data(), sizeof message);
      message.tokens[0] = (message.tokens[0] + 1) % 7;
      std::memcpy(data.data(), &message, sizeof message);
    }
  }

 private:
  int bad_rank_;
  int bad_message_;
  int messages_ = 0;
};

class SpeculativeTp : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path dir = write_tiny_checkpoint_on_root(
        tensor_parallel_tiny_spec(4), comm_, dir_, "selfspec-spec-tp");
    model_ = load_model(dir, comm_);
  }

  GenerationResult speculative(
      Communicator& comm, const GenerationOptions& generation, const std::string& controller_kind,
      bool debug_sync = false, int max_draft = 4,
      const LayerPlan& plan = LayerPlan::skipping(4, std::vector<int>{1, 2}, std::vector<int>{2})) {
    KvCache kv = model_->make_kv_cache(64);
    LayerSkipDrafter drafter(plan, "test");
    ControllerOptions controller_options;
    controller_options.kind = controller_kind;
    controller_options.max_draft = max_draft;
    controller_options.threshold = 0.3;
    auto controller = make_draft_length_controller(controller_options);
    GenerationOptions options = generation;
    options.debug_sync = debug_sync;
    Decoder decoder(*model_, comm, drafter, *controller);
    return decoder.generate(prompt_, options, kv);
  }

  MpiComm comm_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<LlamaModel> model_;
  const std::vector<std::int32_t> prompt_ = {1, 40, 7, 88, 23};
};

TEST_F(SpeculativeTp, GreedyEqualsAutoregressiveForEverySkipSetControllerKAndLogitsMode) {
  GenerationOptions generation;
  generation.max_new_tokens = 30;
  generation.ignore_eos = true;
  KvCache kv = model_->make_kv_cache(64);
  Decoder decoder(*model_, comm_);
  const std::vector<std::int32_t> expected = decoder.generate(prompt_, generation, kv).tokens;
  const std::vector<std::pair<std::string, LayerPlan>> plans = {
      {"nothing", LayerPlan::full(4)},
      {"some", LayerPlan::skipping(4, std::vector<int>{1, 2}, std::vector<int>{2})},
      {"almost everything",
       LayerPlan::skipping(4, std::vector<int>{0, 1, 2, 3}, std::vector<int>{0, 1, 3})}};
  for (const auto& [plan_name, plan] : plans) {
    for (const char* kind : {"fixed", "threshold", "adaptive", "thompson"}) {
      for (int k : {1, 4, 12}) {
        for (LogitsMode mode : {LogitsMode::kGather, LogitsMode::kLocal}) {
          GenerationOptions g = generation;
          g.logits = mode;
          const GenerationResult r = speculative(comm_, g, kind, /*debug_sync=*/true, k, plan);
          EXPECT_EQ(r.tokens, expected) << plan_name << " / " << kind << " / K " << k << " / "
                                        << logits_mode_name(mode) << " / rank " << comm_.rank();
        }
      }
    }
  }
}

// Kept ids spread over the vocabulary, and kept ids only in [0, 20): at TP 2 and 4 every rank but
// the first holds none of them in its shard.
std::vector<std::vector<std::int32_t>> pruned_vocabularies() {
  std::vector<std::int32_t> spread, first_shard_only;
  for (std::int32_t id = 0; id < 97; id += 3) spread.push_back(id);
  for (std::int32_t id = 19; id >= 0; --id) first_shard_only.push_back(id);
  return {spread, first_shard_only};
}

TEST_F(SpeculativeTp, PrunedDraftVocabularyKeepsGreedyOutputEvenWithEmptyShards) {
  GenerationOptions generation;
  generation.max_new_tokens = 30;
  generation.ignore_eos = true;
  KvCache kv = model_->make_kv_cache(64);
  Decoder decoder(*model_, comm_);
  const std::vector<std::int32_t> expected = decoder.generate(prompt_, generation, kv).tokens;
  for (const std::vector<std::int32_t>& ids : pruned_vocabularies()) {
    const DraftVocabulary vocabulary(*model_, ids);
    if (comm_.size() > 1 && ids.size() == 20 && comm_.rank() > 0) {
      EXPECT_EQ(vocabulary.local_size(), 0) << "rank " << comm_.rank();
    }
    for (const char* kind : {"fixed", "threshold"}) {
      for (LogitsMode mode : {LogitsMode::kGather, LogitsMode::kLocal}) {
        GenerationOptions g = generation;
        g.logits = mode;
        g.draft.vocabulary = &vocabulary;
        const GenerationResult r = speculative(comm_, g, kind, /*debug_sync=*/true);
        EXPECT_EQ(r.tokens, expected) << ids.size() << " kept ids / " << kind << " / "
                                      << logits_mode_name(mode) << " / rank " << comm_.rank();
        EXPECT_GT(r.stats.drafted, 0);
      }
    }
  }
}

TEST_F(SpeculativeTp, PrunedDraftVocabularySamplesIdenticallyInBothLogitsModes) {
  for (const std::vector<std::int32_t>& ids : pruned_vocabularies()) {
    const DraftVocabulary vocabulary(*model_, ids);
    for (const SamplingParams& sampling :
         {SamplingParams{0.9, 0, 1.0, 21}, SamplingParams{1.3, 7, 0.9, 22},
          SamplingParams{1.1, 0, 0.8, 23}}) {
      GenerationOptions g;
      g.max_new_tokens = 40;
      g.ignore_eos = true;
      g.sampling = sampling;
      g.draft.vocabulary = &vocabulary;
      g.logits = LogitsMode::kGather;
      const GenerationResult gathered = speculative(comm_, g, "adaptive", /*debug_sync=*/true);
      g.logits = LogitsMode::kLocal;
      const GenerationResult local = speculative(comm_, g, "adaptive", /*debug_sync=*/true);
      EXPECT_EQ(gathered.tokens, local.tokens)
          << ids.size() << " kept ids, temperature " << sampling.temperature;
      EXPECT_EQ(gathered.stats.drafted, local.stats.drafted);
      EXPECT_EQ(gathered.stats.accepted, local.stats.accepted);
    }
  }
}

TEST_F(SpeculativeTp, GatherAndLocalReductionDecideIdenticallyWhenSampling) {
  for (const SamplingParams& sampling :
       {SamplingParams{0.9, 0, 1.0, 11}, SamplingParams{1.3, 7, 0.9, 12},
        SamplingParams{1.1, 0, 0.8, 13}}) {
    GenerationOptions g;
    g.max_new_tokens = 40;
    g.ignore_eos = true;
    g.sampling = sampling;
    g.logits = LogitsMode::kGather;
    const GenerationResult gathered = speculative(comm_, g, "adaptive");
    g.logits = LogitsMode::kLocal;
    const GenerationResult local = speculative(comm_, g, "adaptive");
    EXPECT_EQ(gathered.tokens, local.tokens) << "temperature " << sampling.temperature;
    EXPECT_EQ(gathered.stats.drafted, local.stats.drafted);
    EXPECT_EQ(gathered.stats.accepted, local.stats.accepted);
    EXPECT_LT(gathered.stats.accepted, gathered.stats.drafted) << "rejections must occur";
  }
}

// Token trees (alternatives verified under a tree mask, the accepted path's KV rows compacted on
// every rank): greedy output is unchanged; sampling decides identically in both logits modes.
TEST_F(SpeculativeTp, TreesKeepGreedyOutputAndSampleIdenticallyInBothLogitsModes) {
  GenerationOptions generation;
  generation.max_new_tokens = 30;
  generation.ignore_eos = true;
  KvCache kv = model_->make_kv_cache(64);
  Decoder decoder(*model_, comm_);
  const std::vector<std::int32_t> expected = decoder.generate(prompt_, generation, kv).tokens;
  std::int64_t alternatives_accepted = 0;
  for (const char* widths : {"swift", "1:3"}) {
    for (const char* kind : {"fixed", "threshold"}) {
      for (LogitsMode mode : {LogitsMode::kGather, LogitsMode::kLocal}) {
        GenerationOptions g = generation;
        g.logits = mode;
        g.tree = TreeWidths::parse(widths);
        const GenerationResult r = speculative(comm_, g, kind, /*debug_sync=*/true);
        EXPECT_EQ(r.tokens, expected) << widths << " / " << kind << " / " << logits_mode_name(mode)
                                      << " / rank " << comm_.rank();
        alternatives_accepted += r.stats.alternatives_accepted;
      }
    }
  }
  EXPECT_GT(alternatives_accepted, 0);
  for (const SamplingParams& sampling :
       {SamplingParams{0.9, 0, 1.0, 31}, SamplingParams{1.3, 7, 0.9, 32}}) {
    GenerationOptions g;
    g.max_new_tokens = 40;
    g.ignore_eos = true;
    g.sampling = sampling;
    g.tree = TreeWidths::parse("0.7:4,1:2");
    g.logits = LogitsMode::kGather;
    const GenerationResult gathered = speculative(comm_, g, "adaptive", /*debug_sync=*/true);
    g.logits = LogitsMode::kLocal;
    const GenerationResult local = speculative(comm_, g, "adaptive", /*debug_sync=*/true);
    EXPECT_EQ(gathered.tokens, local.tokens) << "temperature " << sampling.temperature;
    EXPECT_EQ(gathered.stats.accepted, local.stats.accepted);
    EXPECT_EQ(gathered.stats.alternatives_accepted, local.stats.alternatives_accepted);
    EXPECT_GT(gathered.stats.alternatives, 0);
  }
}

TEST_F(SpeculativeTp, DebugSyncCatchesADivergentRank) {
  if (comm_.size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  GenerationOptions generation;
  generation.max_new_tokens = 30;
  generation.ignore_eos = true;
  // Rank 1 corrupts its copy of the 4th control message.
  DivergingComm diverging(comm_, 1, 3);
  try {
    speculative(diverging, generation, "fixed", /*debug_sync=*/true);
    ADD_FAILURE() << "the divergence went unnoticed on rank " << comm_.rank();
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("ranks diverged at control step 3"));
  }
  // Without corruption the check stays silent (the model is still usable afterwards).
  EXPECT_NO_THROW(speculative(comm_, generation, "fixed", /*debug_sync=*/true));
}

}  // namespace
}  // namespace selfspec::testing
