// Device-side verification's protocols on the CPU (backend/shard_reductions.hpp): the local-
// reduction verifier with its statistics, and the gathering verifier with its whole rows,
// exchanged through device-buffer collectives — a threaded fake communicator standing in for
// NCCL, host memory standing in for the GPU's — decide exactly alike over the same vocab shards,
// greedy and sampled, at 1, 2 and 3 ranks, and exactly like the host-collective exchange. The CUDA
// halves (kernels/cuda/shard_walk.cu, CudaShardReductions) are compared with these on a GPU
// (tests/gpu).
#include "backend/shard_reductions.hpp"
#include "core/error.hpp"
#include "tests/support/thread_comm.hpp"
#include "verify/sharded_logits.hpp"
#include "verify/token_picker.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace selfspec {
namespace {

using testing::run_ranks;
using testing::ThreadComm;

constexpr std::int64_t kVocab = 301;  // splits unevenly over 2 and 3 ranks
constexpr int kDraftLength = 4;
constexpr int kRounds = 40;

ShardPlan vocab_shard(int ranks, int rank) {
  ShardPlan shard;
  shard.tp = ranks;
  shard.rank = rank;
  shard.vocab = split_range(kVocab, ranks, rank);
  for (int r = 0; r < ranks; ++r)
    shard.vocab_counts.push_back(split_range(kVocab, ranks, r).size());
  return shard;
}

// One round's logits (the same on every rank): the draft's rows, near the target's so that some
// drafts are accepted, and the verification's k + 1 rows.
struct RoundLogits {
  std::vector<std::vector<float>> draft;  // kDraftLength rows of kVocab
  std::vector<float> verify;              // (kDraftLength + 1) × kVocab
};

RoundLogits round_logits(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  RoundLogits logits;
  logits.verify.resize(static_cast<std::size_t>((kDraftLength + 1) * kVocab));
  for (float& v : logits.verify) v = normal(rng);
  for (int i = 0; i < kDraftLength; ++i) {
    std::vector<float> row(logits.verify.begin() + i * kVocab,
                           logits.verify.begin() + (i + 1) * kVocab);
    for (float& v : row) v += noise(rng);
    logits.draft.push_back(std::move(row));
  }
  return logits;
}

std::vector<float> shard_rows(std::span<const float> rows, const ShardPlan& shard) {
  std::vector<float> out;
  for (std::size_t begin = 0; begin < rows.size(); begin += static_cast<std::size_t>(kVocab)) {
    out.insert(out.end(), rows.begin() + static_cast<std::ptrdiff_t>(begin + shard.vocab.begin),
               rows.begin() + static_cast<std::ptrdiff_t>(begin + shard.vocab.end));
  }
  return out;
}

// One drafting round and its verification (every rank); the verdict is meaningful on rank 0.
Verdict play_round(TokenPicker& picker, Communicator& comm, const ShardPlan& shard,
                   const RoundLogits& logits) {
  picker.begin_round();
  Draft draft;
  for (int i = 0; i < kDraftLength; ++i) {
    DraftChoice choice = picker.draft(shard_rows(logits.draft[static_cast<std::size_t>(i)], shard));
    comm.broadcast_object(choice.token, 0);  // rank 0 decides; the draft is known everywhere
    draft.add(choice.token, i == 0 ? Draft::kRoot : i - 1, choice.confidence);
  }
  return picker.verify(shard_rows(logits.verify, shard), draft);
}

// Every round's verdict on rank 0 of `ranks` ranks: the local mode and the gathering mode, both
// over host reductions that exchange through device collectives when the communicator has them
// (the statistics, the whole rows) and through host collectives otherwise.
struct Verdicts {
  std::vector<Verdict> local;
  std::vector<Verdict> gather;
  int device_collectives = 0;
};

Verdicts play(int ranks, bool device_buffers, const SamplingParams& sampling) {
  Verdicts verdicts;
  run_ranks(ranks, device_buffers, [&](ThreadComm& comm) {
    const ShardPlan shard = vocab_shard(ranks, comm.rank());
    TokenPicker local(
        {.mode = LogitsMode::kLocal, .sampling = sampling}, comm, shard,
        make_host_shard_reductions(shard.vocab_shard(), HostExchange::kDeviceCollectives));
    TokenPicker gather(
        {.mode = LogitsMode::kGather, .sampling = sampling}, comm, shard,
        make_host_shard_reductions(shard.vocab_shard(), HostExchange::kDeviceCollectives));
    for (int round = 0; round < kRounds; ++round) {
      const RoundLogits logits = round_logits(1000 + static_cast<std::uint64_t>(round));
      const Verdict by_local = play_round(local, comm, shard, logits);
      const Verdict by_gather = play_round(gather, comm, shard, logits);
      if (comm.is_root()) {
        verdicts.local.push_back(by_local);
        verdicts.gather.push_back(by_gather);
      }
    }
    if (comm.is_root()) verdicts.device_collectives = comm.device_collectives();
  });
  return verdicts;
}

int accepted_tokens(const std::vector<Verdict>& verdicts) {
  int total = 0;
  for (const Verdict& v : verdicts) total += v.accepted_count();
  return total;
}

TEST(DeviceVerification, GreedyVerdictsEqualTheGatheringVerifiersAndTheSingleRanks) {
  const SamplingParams greedy{0.0, 0, 1.0, 7};
  const Verdicts single = play(1, true, greedy);
  for (const int ranks : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << ranks << " ranks");
    const Verdicts verdicts = play(ranks, true, greedy);
    ASSERT_EQ(verdicts.local.size(), static_cast<std::size_t>(kRounds));
    EXPECT_EQ(verdicts.local, verdicts.gather);
    EXPECT_EQ(verdicts.local, single.local);  // greedy: the same at every TP degree
    // The statistics and the rows went through the device exchange (one rank exchanges nothing):
    // one exchange per draft step and verification in each mode.
    if (ranks > 1) {
      EXPECT_GE(verdicts.device_collectives, 2 * kRounds * (kDraftLength + 1));
    } else {
      EXPECT_EQ(verdicts.device_collectives, 0);
    }
  }
  // The rounds exercise both outcomes: some drafts accepted, some rejected.
  const int accepted = accepted_tokens(single.local);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, kRounds * kDraftLength);
}

TEST(DeviceVerification, SampledDrawsEqualTheGatheringVerifiersForTheSameSeed) {
  for (const int ranks : {1, 2, 3}) {
    for (const std::uint64_t seed : {11u, 12u}) {
      SCOPED_TRACE(::testing::Message() << ranks << " ranks, seed " << seed);
      const Verdicts verdicts = play(ranks, true, SamplingParams{0.9, 0, 1.0, seed});
      EXPECT_EQ(verdicts.local, verdicts.gather);
      if (ranks > 1) {
        EXPECT_GE(verdicts.device_collectives, 2 * kRounds * (kDraftLength + 1));
      }
      const int accepted = accepted_tokens(verdicts.local);
      EXPECT_GT(accepted, 0);
      EXPECT_LT(accepted, kRounds * kDraftLength);
    }
  }
}

TEST(DeviceVerification, WithoutDeviceBuffersTheExchangeUsesHostCollectivesAlike) {
  const SamplingParams sampled{0.9, 0, 1.0, 5};
  const Verdicts on_device = play(3, true, sampled);
  const Verdicts on_host = play(3, false, sampled);
  EXPECT_EQ(on_host.device_collectives, 0);
  EXPECT_GT(on_device.device_collectives, 0);
  EXPECT_EQ(on_host.local, on_device.local);
  EXPECT_EQ(on_host.local, on_host.gather);
}

// row_argmax (greedy decisions, no exponentials) is row_stats' argmax in both modes at every
// split, ties (first id) and -inf / NaN entries included.
TEST(DeviceVerification, RowArgmaxIsTheArgmaxOfRowStatsInBothModes) {
  std::vector<float> rows = round_logits(77).verify;
  const auto at = [&](std::int64_t row, std::int64_t id) -> float& {
    return rows[static_cast<std::size_t>(row * kVocab + id)];
  };
  at(1, 7) = at(1, 250) = 40.0f;  // a tie across the 2- and 3-way splits
  for (std::int64_t id = 0; id < 200; ++id) at(2, id) = -INFINITY;  // whole shards of -inf
  at(3, 5) = NAN;
  for (const int ranks : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << ranks << " ranks");
    std::vector<std::int32_t> by_stats, local_ids, gather_ids;
    run_ranks(ranks, false, [&](ThreadComm& comm) {
      const ShardPlan shard = vocab_shard(ranks, comm.rank());
      const std::vector<float> mine = shard_rows(rows, shard);
      const LogitRows logit_rows{mine.data(), kDraftLength + 1, shard.vocab.size(), false};
      for (const LogitsMode mode : {LogitsMode::kLocal, LogitsMode::kGather}) {
        const auto logits = make_sharded_logits(mode, comm, shard, false,
                                                make_host_shard_reductions(shard.vocab_shard()));
        logits->set_rows(logit_rows);
        const std::vector<RowStats> stats = logits->row_stats(1.0);
        const std::vector<std::int32_t> ids = logits->row_argmax();
        if (!comm.is_root()) continue;
        (mode == LogitsMode::kLocal ? local_ids : gather_ids) = ids;
        by_stats.clear();
        for (const RowStats& s : stats) by_stats.push_back(s.argmax);
      }
    });
    ASSERT_EQ(by_stats.size(), static_cast<std::size_t>(kDraftLength + 1));
    EXPECT_EQ(local_ids, by_stats);
    EXPECT_EQ(gather_ids, by_stats);
    EXPECT_EQ(by_stats[1], 7);
  }
}

TEST(DeviceVerification, RowsInTheWrongMemoryOrOfTheWrongWidthAreRefused) {
  const ShardPlan shard = vocab_shard(1, 0);
  const auto reductions = make_host_shard_reductions(shard.vocab_shard());
  const std::vector<float> row(static_cast<std::size_t>(kVocab), 0.0f);
  EXPECT_THROW(reductions->set_rows(LogitRows{row.data(), 1, kVocab, true}), Error);
  EXPECT_THROW(reductions->set_rows(LogitRows{row.data(), 1, kVocab - 1, false}), Error);
  EXPECT_NO_THROW(reductions->set_rows(LogitRows{row.data(), 1, kVocab, false}));
  // The gathering verifier checks the rows given to it the same way.
  testing::ThreadHub hub(1);
  ThreadComm comm(hub, 0, true);
  const auto gather = make_sharded_logits(LogitsMode::kGather, comm, shard, false,
                                          make_host_shard_reductions(shard.vocab_shard()));
  EXPECT_THROW(gather->set_rows(LogitRows{row.data(), 1, kVocab, true}), Error);
  EXPECT_NO_THROW(gather->set_rows(LogitRows{row.data(), 1, kVocab, false}));
}

}  // namespace
}  // namespace selfspec
