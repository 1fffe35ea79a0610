// Run under `mpirun -np N` (N = 1, 2, 4): collectives with exactly predictable results, and the
// tensor-parallel model against the single-rank model on the same checkpoint — identical greedy
// tokens, close logits, and a residual stream that is bit-identical on every rank.
#include "comm/local_comm.hpp"
#include "comm/mpi_comm.hpp"
#include "decode/decoder.hpp"
#include "verify/gathered_logits.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

namespace selfspec::testing {
namespace {

std::uint64_t fnv1a(std::span<const float> data) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  for (std::size_t i = 0; i < data.size_bytes(); ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// Sum over ranks of a per-rank count, on every rank.
std::uint64_t sum_over_ranks(Communicator& comm, std::uint64_t value) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.all_gather_u64(value, all);
  return std::accumulate(all.begin(), all.end(), std::uint64_t{0});
}

bool same_on_all_ranks(Communicator& comm, std::uint64_t value) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.all_gather_u64(value, all);
  return std::all_of(all.begin(), all.end(), [&](std::uint64_t v) { return v == all[0]; });
}

TEST(Collectives, AllReduceIsExactAndBitIdenticalOnEveryRank) {
  MpiComm comm;
  const int n = comm.size();
  // Small integers: the sum is exact in f32 and known in closed form.
  std::vector<float> data(10007);
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<float>((comm.rank() + 1) * (i % 97));
  comm.all_reduce_sum(data);
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] != static_cast<float>((i % 97) * n * (n + 1) / 2)) ++wrong;
  }
  EXPECT_EQ(sum_over_ranks(comm, wrong), 0u) << "wrong elements summed over all ranks";
  // Arbitrary floats: whatever rounding happens, every rank must hold the same bits.
  std::vector<float> noisy(4099);
  for (std::size_t i = 0; i < noisy.size(); ++i) {
    noisy[i] = std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(comm.rank())) * 1e3f;
  }
  comm.all_reduce_sum(noisy);
  EXPECT_TRUE(same_on_all_ranks(comm, fnv1a(noisy)));
}

TEST(Collectives, GatherBroadcastAndAllGatherMoveExactValues) {
  MpiComm comm;
  const int n = comm.size();
  std::vector<std::int64_t> counts;
  for (int r = 0; r < n; ++r) counts.push_back(3 + r);  // uneven, like a vocab split
  std::vector<float> mine(static_cast<std::size_t>(counts[static_cast<std::size_t>(comm.rank())]));
  for (std::size_t i = 0; i < mine.size(); ++i)
    mine[i] = static_cast<float>(comm.rank() * 100 + static_cast<int>(i));
  const auto total =
      static_cast<std::size_t>(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}));
  std::vector<float> everything(total, -1.0f);
  comm.all_gather(mine, everything, counts);
  std::uint64_t wrong = 0;
  std::size_t k = 0;
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < counts[static_cast<std::size_t>(r)]; ++i, ++k) {
      if (everything[k] != static_cast<float>(r * 100 + i)) ++wrong;
    }
  }
  std::vector<float> gathered(total, -1.0f);
  comm.gather(mine, gathered, counts, 0);
  if (comm.is_root() && gathered != everything) ++wrong;
  std::array<std::int32_t, 5> message{};
  if (comm.is_root()) message = {5, 4, 3, 2, 1};
  comm.broadcast_object(message, 0);
  if (message != std::array<std::int32_t, 5>{5, 4, 3, 2, 1}) ++wrong;
  EXPECT_EQ(sum_over_ranks(comm, wrong), 0u);
}

struct TpVariant {
  std::string name;
  TinyModelSpec spec;
};
void PrintTo(const TpVariant& variant, std::ostream* os) {
  *os << variant.name;
}

class TensorParallel : public ::testing::TestWithParam<TpVariant> {
 protected:
  // Rank 0 writes the checkpoint; every rank gets its path.
  std::filesystem::path write_checkpoint(MpiComm& comm, const TinyModelSpec& spec) {
    if (comm.is_root()) {
      dir_ = std::make_unique<TempDir>("selfspec-tp");
      write_tiny_checkpoint(spec, dir_->path());
    }
    std::array<char, 512> path{};
    if (comm.is_root()) std::strncpy(path.data(), dir_->path().c_str(), path.size() - 1);
    comm.broadcast_object(path, 0);
    return std::filesystem::path(path.data());
  }
  // The test checkpoint loaded whole on one rank (`local`) and sharded over `comm`.
  std::pair<std::unique_ptr<LlamaModel>, std::unique_ptr<LlamaModel>> load_single_and_sharded(
      MpiComm& comm, LocalComm& local) {
    const std::filesystem::path dir = write_checkpoint(comm, GetParam().spec);
    return {load_model(dir, local), load_model(dir, comm)};
  }
  std::unique_ptr<TempDir> dir_;
};

TEST_P(TensorParallel, GreedyTokensAndLogitsMatchSingleRank) {
  MpiComm comm;
  const TinyModelSpec& spec = GetParam().spec;
  LocalComm local;
  auto [single, sharded] = load_single_and_sharded(comm, local);
  if (comm.size() > 1 && spec.kv_heads < comm.size()) {
    EXPECT_TRUE(sharded->shard().kv_replicated);
  }

  // Logits of every prompt position: gathered from the vocab shards vs the single-rank model.
  const std::vector<std::int32_t> prompt = {1, 11, 29, 3, 47, 8, 90, 15};
  KvCache single_kv = single->make_kv_cache(64);
  KvCache sharded_kv = sharded->make_kv_cache(64);
  std::uint64_t residual_hash = 0;
  const ForwardObserver observer = [&](std::string_view name, int, std::span<const float> data,
                                       std::int64_t) {
    if (name == "final_norm") residual_hash = fnv1a(data);
  };
  std::vector<std::int32_t> rows(prompt.size());
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<std::int32_t> positions = rows;
  ForwardArgs args;
  args.tokens = prompt;
  args.positions = positions;
  args.logit_rows = rows;
  args.observer = &observer;
  std::vector<float> local_logits;
  sharded->forward(args, sharded_kv, local_logits);
  EXPECT_TRUE(same_on_all_ranks(comm, residual_hash))
      << "the replicated residual stream differs between ranks";
  GatheredLogits gatherer(comm, sharded->shard());
  gatherer.set_rows(local_logits, static_cast<std::int64_t>(prompt.size()));
  std::vector<float> gathered;
  if (comm.is_root()) {
    for (std::size_t r = 0; r < prompt.size(); ++r) {
      const std::span<const float> row = gatherer.row(static_cast<std::int64_t>(r));
      gathered.insert(gathered.end(), row.begin(), row.end());
    }
  }
  const std::vector<float> expected = forward_all_rows(*single, single_kv, prompt);
  if (comm.is_root()) {
    ASSERT_EQ(gathered.size(), expected.size());
    std::vector<double> expected_double(expected.begin(), expected.end());
    EXPECT_LT(relative_max_error(gathered, expected_double), 1e-5);
    if (comm.size() == 1) {
      EXPECT_TRUE(bit_identical(gathered, expected));
    }
  }

  // Greedy generation through the rank-0-controlled loop.
  GenerationOptions options;
  options.max_new_tokens = 16;
  options.ignore_eos = true;
  single_kv.clear();
  sharded_kv.clear();
  Decoder single_decoder(*single, local);
  Decoder sharded_decoder(*sharded, comm);
  const GenerationResult reference = single_decoder.generate(prompt, options, single_kv);
  const GenerationResult result = sharded_decoder.generate(prompt, options, sharded_kv);
  EXPECT_EQ(result.tokens, reference.tokens) << "rank " << comm.rank();
  EXPECT_EQ(sharded_kv.length(), single_kv.length());
}

// The tp-invariant reduction (model/fixed_partition_projection.hpp): the sharded model's logits,
// gathered from the vocab shards, and its final-norm hidden states are the single-rank model's
// bits at every np, and so are its greedy tokens.
TEST_P(TensorParallel, TpInvariantReductionIsBitIdenticalToSingleRank) {
  MpiComm comm;
  LocalComm local;
  auto [single, sharded] = load_single_and_sharded(comm, local);
  single->set_reduction_order(ReductionOrder::kTpInvariant);
  sharded->set_reduction_order(ReductionOrder::kTpInvariant);

  const std::vector<std::int32_t> prompt = {1, 11, 29, 3, 47, 8, 90, 15, 2, 64};
  std::vector<std::int32_t> rows(prompt.size());
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> single_hidden;
  std::vector<float> sharded_hidden;
  const auto keep = [](std::vector<float>& into) {
    return ForwardObserver(
        [&into](std::string_view name, int, std::span<const float> data, std::int64_t) {
          if (name == "final_norm") into.assign(data.begin(), data.end());
        });
  };
  const ForwardObserver single_observer = keep(single_hidden);
  const ForwardObserver sharded_observer = keep(sharded_hidden);
  KvCache single_kv = single->make_kv_cache(64);
  KvCache sharded_kv = sharded->make_kv_cache(64);
  const std::vector<float> expected =
      forward_rows(*single, single_kv, prompt, rows, nullptr, nullptr, {}, &single_observer);
  const std::vector<float> local_logits =
      forward_rows(*sharded, sharded_kv, prompt, rows, nullptr, nullptr, {}, &sharded_observer);
  EXPECT_TRUE(bit_identical(sharded_hidden, single_hidden)) << "rank " << comm.rank();
  GatheredLogits gatherer(comm, sharded->shard());
  gatherer.set_rows(local_logits, static_cast<std::int64_t>(prompt.size()));
  if (comm.is_root()) {
    std::vector<float> gathered;
    for (std::size_t r = 0; r < prompt.size(); ++r) {
      const std::span<const float> row = gatherer.row(static_cast<std::int64_t>(r));
      gathered.insert(gathered.end(), row.begin(), row.end());
    }
    EXPECT_TRUE(bit_identical(gathered, expected)) << "logits differ from the single rank's";
  }
  // Rank 0's statistics over whole rows equal the single rank's, to the last bit of the doubles.
  const auto invariant_logits =
      make_sharded_logits(LogitsMode::kLocal, comm, sharded->shard(), true);
  invariant_logits->set_rows(local_logits, static_cast<std::int64_t>(prompt.size()));
  const auto single_logits = make_sharded_logits(LogitsMode::kLocal, local, single->shard());
  single_logits->set_rows(expected, static_cast<std::int64_t>(prompt.size()));
  const std::vector<RowStats> sharded_stats = invariant_logits->row_stats(1.0 / 0.7);
  const std::vector<RowStats> single_stats = single_logits->row_stats(1.0 / 0.7);
  if (comm.is_root()) {
    ASSERT_EQ(sharded_stats.size(), single_stats.size());
    for (std::size_t r = 0; r < single_stats.size(); ++r) {
      EXPECT_EQ(sharded_stats[r].max, single_stats[r].max) << "row " << r;
      EXPECT_EQ(sharded_stats[r].sum_exp, single_stats[r].sum_exp) << "row " << r;
      EXPECT_EQ(sharded_stats[r].argmax, single_stats[r].argmax) << "row " << r;
    }
  }

  // Decode steps one token at a time continue bit-identically (and so do the greedy tokens).
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.ignore_eos = true;
  single_kv.clear();
  sharded_kv.clear();
  const GenerationResult reference = Decoder(*single, local).generate(prompt, options, single_kv);
  const GenerationResult result = Decoder(*sharded, comm).generate(prompt, options, sharded_kv);
  EXPECT_EQ(result.tokens, reference.tokens) << "rank " << comm.rank();

  // Sampling (top-p, the local logits mode asked for) draws the same tokens for the same seed.
  options.sampling.temperature = 1.3;
  options.sampling.top_p = 0.95;
  options.sampling.seed = 11;
  options.logits = LogitsMode::kLocal;
  single_kv.clear();
  sharded_kv.clear();
  const GenerationResult sampled_reference =
      Decoder(*single, local).generate(prompt, options, single_kv);
  const GenerationResult sampled = Decoder(*sharded, comm).generate(prompt, options, sharded_kv);
  EXPECT_EQ(sampled.tokens, sampled_reference.tokens) << "rank " << comm.rank();
}

std::vector<TpVariant> tp_variants() {
  TinyModelSpec gqa;
  gqa.hidden = 64;
  gqa.heads = 8;
  gqa.kv_heads = 2;  // np 4: KV heads replicated
  gqa.layers = 3;
  gqa.intermediate = 102;  // uneven split at np 4
  gqa.vocab = 97;          // uneven vocab shards
  gqa.scale = 1.5;
  TinyModelSpec mha = gqa;
  mha.kv_heads = 8;
  mha.tie = true;
  TinyModelSpec bias = gqa;
  bias.kv_heads = 4;
  bias.attention_bias = true;
  bias.dtype = DType::kBF16;
  return {{"gqa_replicated_kv", gqa}, {"mha_tied", mha}, {"gqa_bias_bf16", bias}};
}

INSTANTIATE_TEST_SUITE_P(Models, TensorParallel, ::testing::ValuesIn(tp_variants()),
                         [](const auto& test_info) { return test_info.param.name; });

}  // namespace
}  // namespace selfspec::testing
