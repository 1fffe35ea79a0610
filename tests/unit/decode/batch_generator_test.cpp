// Batched plain decoding (decode/batch_generator.hpp): every request's tokens equal
// Decoder::generate's (greedy and seeded sampling, end-of-sequence ids, chunked prompts) at any
// batch size and pass budget, at TP 1 and 2; with every row's logits and states read, each row
// equals a teacher-forced forward over the finished sequence, bit for bit; results come in
// request order and a callback can stop the run.
#include "decode/batch_generator.hpp"
#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "decode/decoder.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/thread_comm.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "tests/support/tiny_models.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

namespace selfspec::testing {
namespace {

// Ragged prompts, ragged budgets, half of them sampled with their own seeds.
std::vector<BatchRequest> requests_for(std::int64_t vocab, int count) {
  std::vector<BatchRequest> requests;
  for (int r = 0; r < count; ++r) {
    BatchRequest request;
    for (int i = 0; i < 1 + (5 * r) % 11; ++i)
      request.prompt.push_back(static_cast<std::int32_t>((3 + 7 * r + 11 * i) % vocab));
    request.max_new_tokens = r % 5 == 4 ? 0 : 3 + (r * 4) % 9;
    if (r % 2 == 1) {
      request.sampling.temperature = 0.9;
      request.sampling.top_k = r % 3 == 0 ? 0 : 8;
      request.sampling.seed = 100 + static_cast<std::uint64_t>(r);
    }
    requests.push_back(request);
  }
  return requests;
}

BatchResult decode_alone(LlamaModel& model, Communicator& comm, const BatchRequest& request,
                         const std::vector<std::int32_t>& eos) {
  if (request.max_new_tokens == 0) return {};
  GenerationOptions options;
  options.max_new_tokens = request.max_new_tokens;
  options.sampling = request.sampling;
  options.eos_ids = eos;
  options.logits = LogitsMode::kLocal;
  KvCache kv = model.make_kv_cache(static_cast<std::int64_t>(request.prompt.size()) +
                                   request.max_new_tokens);
  const GenerationResult result = Decoder(model, comm).generate(request.prompt, options, kv);
  return {result.tokens, result.stopped_on_eos};
}

// Returns how many requests stopped at an end-of-sequence id.
int expect_tokens_equal_decoder(LlamaModel& model, Communicator& comm, std::int64_t batch,
                                std::int64_t pass_tokens, const std::vector<std::int32_t>& eos) {
  const std::vector<BatchRequest> requests = requests_for(model.config().vocab_size, 13);
  BatchGeneratorOptions options;
  options.batch = batch;
  options.pass_tokens = pass_tokens;
  options.eos_ids = eos;
  BatchGenerator generator(model, comm, options);
  std::vector<std::int64_t> order;
  int eos_stops = 0;
  generator.run(requests, {}, [&](std::int64_t r, BatchResult&& result) {
    order.push_back(r);
    const BatchResult alone = decode_alone(model, comm, requests[static_cast<std::size_t>(r)], eos);
    EXPECT_EQ(result.tokens, alone.tokens) << "request " << r << ", B " << batch;
    EXPECT_EQ(result.stopped_on_eos, alone.stopped_on_eos) << "request " << r;
    eos_stops += result.stopped_on_eos ? 1 : 0;
    return true;
  });
  std::vector<std::int64_t> expected(requests.size());
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(order, expected) << "results in request order";
  EXPECT_GT(generator.stats().passes, 0);
  return eos_stops;
}

class BatchGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = write_and_load_model(speculative_tiny_spec(3), dir_.path(), comm_);
  }
  TempDir dir_;
  LocalComm comm_;
  std::unique_ptr<LlamaModel> model_;
};

TEST_F(BatchGeneratorTest, TokensEqualDecoderAtEveryBatchSizeAndBudget) {
  for (std::int64_t batch : {1, 2, 3, 8}) {
    for (std::int64_t pass_tokens : {8, 256}) {
      expect_tokens_equal_decoder(*model_, comm_, batch, pass_tokens, {});
    }
  }
}

TEST_F(BatchGeneratorTest, EndOfSequenceEndsARequestAsDecoderDoes) {
  // Ids the tiny model emits often, so that several requests stop early.
  EXPECT_GE(expect_tokens_equal_decoder(*model_, comm_, 4, 16, {1, 2, 3, 5, 8, 13, 21, 34, 55}), 2);
}

TEST_F(BatchGeneratorTest, EveryRowEqualsATeacherForcedForwardOfTheFinishedSequence) {
  const std::vector<BatchRequest> requests = requests_for(model_->config().vocab_size, 9);
  const auto width = static_cast<std::size_t>(model_->vocab_local());
  const auto hidden = static_cast<std::size_t>(model_->config().hidden_size);
  std::vector<float> pass_hidden;
  const ForwardObserver observer = [&](std::string_view name, int layer,
                                       std::span<const float> data, std::int64_t) {
    if (name == "mlp_out" && layer == 1) pass_hidden.assign(data.begin(), data.end());
  };
  BatchGeneratorOptions options;
  options.batch = 3;
  options.pass_tokens = 6;
  options.feed_last = true;
  options.all_logit_rows = true;
  options.observer = &observer;
  // Per request: position -> (logits, hidden state) as the passes computed them.
  std::vector<std::map<std::int64_t, std::pair<std::vector<float>, std::vector<float>>>> seen(
      requests.size());
  BatchGenerator generator(*model_, comm_, options);
  const bool finished = generator.run(
      requests,
      [&](std::span<const BatchRow> rows, const LogitRows& logits) {
        for (std::size_t i = 0; i < rows.size(); ++i) {
          ASSERT_EQ(rows[i].logit_row, static_cast<std::int32_t>(i));
          const float* l = logits.data + i * width;
          const float* h = pass_hidden.data() + i * hidden;
          ASSERT_FALSE(seen[static_cast<std::size_t>(rows[i].request)].contains(rows[i].position));
          seen[static_cast<std::size_t>(rows[i].request)][rows[i].position] = {{l, l + width},
                                                                               {h, h + hidden}};
        }
      },
      [&](std::int64_t r, BatchResult&& result) {
        std::vector<std::int32_t> sequence = requests[static_cast<std::size_t>(r)].prompt;
        sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
        std::vector<float> alone_hidden;
        const ForwardObserver alone_observer = [&](std::string_view name, int layer,
                                                   std::span<const float> data, std::int64_t) {
          if (name == "mlp_out" && layer == 1) alone_hidden.assign(data.begin(), data.end());
        };
        KvCache kv = model_->make_kv_cache(static_cast<std::int64_t>(sequence.size()));
        std::vector<std::int32_t> all(sequence.size());
        std::iota(all.begin(), all.end(), 0);
        const std::vector<float> teacher =
            forward_rows(*model_, kv, sequence, all, nullptr, nullptr, {}, &alone_observer);
        const auto& rows = seen[static_cast<std::size_t>(r)];
        EXPECT_EQ(rows.size(), sequence.size()) << "request " << r << ": every position once";
        for (const auto& [position, states] : rows) {
          const auto p = static_cast<std::size_t>(position);
          EXPECT_TRUE(bit_identical(states.first,
                                    std::span<const float>(teacher).subspan(p * width, width)))
              << "request " << r << " position " << position;
          EXPECT_TRUE(bit_identical(
              states.second, std::span<const float>(alone_hidden).subspan(p * hidden, hidden)))
              << "request " << r << " position " << position << " (hidden state)";
        }
        return true;
      });
  EXPECT_TRUE(finished);
}

TEST_F(BatchGeneratorTest, DoneCallbackStopsTheRun) {
  const std::vector<BatchRequest> requests = requests_for(model_->config().vocab_size, 10);
  BatchGeneratorOptions options;
  options.batch = 4;
  BatchGenerator generator(*model_, comm_, options);
  int calls = 0;
  EXPECT_FALSE(
      generator.run(requests, {}, [&](std::int64_t, BatchResult&&) { return ++calls < 3; }));
  EXPECT_EQ(calls, 3);
}

TEST_F(BatchGeneratorTest, RefusesBadOptionsAndRequests) {
  BatchGeneratorOptions options;
  options.batch = 0;
  EXPECT_THAT([&] { BatchGenerator(*model_, comm_, options); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("--batch 0")));
  options.batch = 8;
  options.pass_tokens = 4;
  EXPECT_THAT([&] { BatchGenerator(*model_, comm_, options); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("cannot feed 8 sequences")));
  options.pass_tokens = 64;
  BatchGenerator generator(*model_, comm_, options);
  const std::vector<BatchRequest> empty_prompt(1);
  EXPECT_THAT(
      [&] { generator.run(empty_prompt, {}, [](std::int64_t, BatchResult&&) { return true; }); },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr("empty prompt")));
}

TEST(BatchGeneratorTensorParallel, TokensEqualDecoderAtTp2) {
  TempDir dir;
  write_tiny_checkpoint(tensor_parallel_tiny_spec(2), dir.path());
  run_model_ranks_in_both_orders(2, dir.path(), [&](LlamaModel& model, ThreadComm& comm) {
    expect_tokens_equal_decoder(model, comm, 3, 8, {});
  });
}

}  // namespace
}  // namespace selfspec::testing
