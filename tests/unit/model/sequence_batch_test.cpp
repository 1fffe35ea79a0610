// Several sequences in one forward (model/sequence_batch.hpp), bit for bit: each sequence's
// logits and hidden states equal those of a forward over that sequence alone, whatever the batch
// size, the sequences' lengths and which sequences share a pass; at TP 1 and 2, under both
// reduction orders.
#include "model/sequence_batch.hpp"
#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/thread_comm.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "tests/support/tiny_models.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <string>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

// Sequence b's tokens: a different, ragged-length token stream per sequence.
std::vector<std::int32_t> sequence_tokens(std::int64_t b, std::int64_t length, std::int64_t vocab) {
  std::vector<std::int32_t> tokens;
  for (std::int64_t i = 0; i < length; ++i)
    tokens.push_back(static_cast<std::int32_t>((7 * b + 13 * i + i * i * (b + 1) + 1) % vocab));
  return tokens;
}

std::vector<std::int32_t> all_rows(std::size_t n) {
  std::vector<std::int32_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

// A schedule for B sequences: a prefill pass of ragged prompts (sequence b: 2 + 3b tokens, in
// chunks of `chunk` tokens), then decode passes of one token each, where sequence b sits out
// every pass p with (p + b) % 3 == 2. Compares every pass's logits (every row) and the observed
// hidden states with each sequence run alone in its own KV cache, in the same chunks.
void expect_batch_equals_alone(LlamaModel& model, std::int64_t sequences, std::int64_t chunk) {
  const std::int64_t vocab = model.config().vocab_size;
  const std::int64_t capacity = 40;
  SequenceBatch batch(model, sequences, capacity);
  std::vector<KvCache> alone;
  std::vector<std::vector<std::int32_t>> streams;
  for (std::int64_t b = 0; b < sequences; ++b) {
    alone.push_back(model.make_kv_cache(capacity));
    streams.push_back(sequence_tokens(b, capacity, vocab));
  }
  std::vector<std::int64_t> prompt(static_cast<std::size_t>(sequences));
  for (std::int64_t b = 0; b < sequences; ++b) prompt[static_cast<std::size_t>(b)] = 2 + 3 * b;

  std::vector<float> hidden;
  std::int64_t observed_rows = 0;
  const ForwardObserver observer = [&](std::string_view name, int layer,
                                       std::span<const float> data, std::int64_t rows) {
    if (name != "mlp_out" || layer != 1) return;
    hidden.assign(data.begin(), data.end());
    observed_rows = rows;
  };
  const auto v = static_cast<std::size_t>(model.vocab_local());
  const auto h = static_cast<std::size_t>(model.config().hidden_size);
  std::vector<float> logits;
  for (int pass = 0; pass < 12; ++pass) {
    std::vector<SequenceBatch::Step> steps;
    std::vector<std::vector<std::int32_t>> rows;
    rows.reserve(static_cast<std::size_t>(sequences));
    for (std::int64_t b = 0; b < sequences; ++b) {
      const std::int64_t at = batch.length(b);
      const std::int64_t want = at < prompt[static_cast<std::size_t>(b)]
                                    ? std::min(chunk, prompt[static_cast<std::size_t>(b)] - at)
                                    : ((pass + b) % 3 == 2 ? 0 : 1);
      if (want == 0 || at + want > capacity) continue;
      rows.push_back(all_rows(static_cast<std::size_t>(want)));
      steps.push_back({b,
                       std::span(streams[static_cast<std::size_t>(b)])
                           .subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(want)),
                       rows.back()});
    }
    if (steps.empty()) continue;  // every sequence sits this pass out
    batch.forward(model, steps, logits, &observer);
    std::size_t row = 0;
    for (const SequenceBatch::Step& step : steps) {
      std::vector<float> alone_hidden;
      const ForwardObserver alone_observer = [&](std::string_view name, int layer,
                                                 std::span<const float> data, std::int64_t) {
        if (name == "mlp_out" && layer == 1) alone_hidden.assign(data.begin(), data.end());
      };
      const std::vector<float> expected =
          forward_rows(model, alone[static_cast<std::size_t>(step.sequence)], step.tokens,
                       step.logit_rows, nullptr, nullptr, {}, &alone_observer);
      const std::span<const float> got(logits.data() + row * v, step.tokens.size() * v);
      EXPECT_TRUE(bit_identical(got, expected))
          << "B " << sequences << " pass " << pass << " sequence " << step.sequence;
      EXPECT_TRUE(bit_identical(
          std::span<const float>(hidden).subspan(row * h, alone_hidden.size()), alone_hidden))
          << "hidden states, B " << sequences << " pass " << pass << " sequence " << step.sequence;
      row += step.tokens.size();
    }
    EXPECT_EQ(observed_rows, static_cast<std::int64_t>(row));
  }
  for (std::int64_t b = 0; b < sequences; ++b) {
    EXPECT_EQ(batch.length(b), alone[static_cast<std::size_t>(b)].length()) << "sequence " << b;
  }
}

class SequenceBatchTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    TinyModelSpec spec = gqa_tiny_spec(3);
    spec.intermediate = 100;
    spec.vocab = 97;
    spec.attention_bias = true;
    spec.dtype = GetParam();
    spec_ = spec;
    model_ = write_and_load_model(spec, dir_.path(), comm_);
  }

  TinyModelSpec spec_;
  TempDir dir_;
  LocalComm comm_;
  std::unique_ptr<LlamaModel> model_;
};

TEST_P(SequenceBatchTest, EverySequenceEqualsItsForwardAlone) {
  for (std::int64_t sequences : {1, 2, 3, 5}) {
    for (std::int64_t chunk : {1, 4, 64}) expect_batch_equals_alone(*model_, sequences, chunk);
  }
}

TEST_P(SequenceBatchTest, TruncatedSequenceContinuesLikeAFreshOne) {
  SequenceBatch batch(*model_, 2, 16);
  const std::vector<std::int32_t> a = {3, 9, 27, 81, 50, 11};
  const std::vector<std::int32_t> b = {4, 16, 64, 59};
  const std::vector<std::int32_t> rows = {0, 1, 2, 3};
  std::vector<float> logits;
  const std::vector<SequenceBatch::Step> first = {{0, a, {}}, {1, b, {}}};
  batch.forward(*model_, first, logits);
  batch.truncate(0, 2);
  EXPECT_EQ(batch.length(0), 2);
  const std::vector<std::int32_t> c = {5, 6, 7, 8};
  const std::vector<SequenceBatch::Step> second = {{1, c, rows}, {0, c, rows}};
  batch.forward(*model_, second, logits);
  KvCache fresh = model_->make_kv_cache(16);
  const std::vector<std::int32_t> head = {a[0], a[1]};
  forward_rows(*model_, fresh, head, {});
  const std::vector<float> expected = forward_rows(*model_, fresh, c, rows);
  const auto v = static_cast<std::size_t>(model_->vocab_local());
  EXPECT_TRUE(bit_identical(std::span<const float>(logits).subspan(4 * v, 4 * v), expected));
}

TEST_P(SequenceBatchTest, RefusesWhatItCannotRun) {
  SequenceBatch batch(*model_, 2, 4);
  const std::vector<std::int32_t> three = {1, 2, 3};
  std::vector<float> logits;
  const std::vector<SequenceBatch::Step> twice = {{0, three, {}}, {0, three, {}}};
  EXPECT_THAT([&] { batch.forward(*model_, twice, logits); },
              ::testing::ThrowsMessage<Error>(HasSubstr("appears twice")));
  const std::vector<SequenceBatch::Step> outside = {{2, three, {}}};
  EXPECT_THAT([&] { batch.forward(*model_, outside, logits); },
              ::testing::ThrowsMessage<Error>(HasSubstr("outside the batch")));
  const std::vector<std::int32_t> bad_row = {3};
  const std::vector<SequenceBatch::Step> row = {{1, three, bad_row}};
  EXPECT_THAT([&] { batch.forward(*model_, row, logits); },
              ::testing::ThrowsMessage<Error>(HasSubstr("logit row 3")));
  const std::vector<SequenceBatch::Step> fits = {{1, three, {}}};
  batch.forward(*model_, fits, logits);
  EXPECT_THAT([&] { batch.forward(*model_, fits, logits); },
              ::testing::ThrowsMessage<Error>(HasSubstr("exceed its 4 slots")));
  EXPECT_EQ(batch.length(0), 0) << "a refused pass changes nothing";
  EXPECT_EQ(batch.length(1), 3);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SequenceBatchTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& test_info) {
                           return std::string(dtype_name(test_info.param));
                         });

// At TP 2 (each rank's vocabulary shard) under both reduction orders.
TEST(SequenceBatchTensorParallel, EverySequenceEqualsItsForwardAloneAtTp2) {
  TempDir dir;
  const TinyModelSpec spec = tensor_parallel_tiny_spec(2);
  write_tiny_checkpoint(spec, dir.path());
  run_model_ranks_in_both_orders(2, dir.path(), [&](LlamaModel& model, ThreadComm&) {
    expect_batch_equals_alone(model, 3, 4);
  });
}

}  // namespace
}  // namespace selfspec::testing
