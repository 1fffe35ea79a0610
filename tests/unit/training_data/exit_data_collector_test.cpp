// The batched early-exit data collector (training_data/exit_data_collector.hpp): every sequence's
// rows — hidden states, top-k ids and log-probabilities, tokens, positions, next tokens — equal
// the teacher-forced reference exit_data_targets over the finished sequence, bit for bit, at
// several batch sizes, with generated (greedy and sampled, EOS) and fed-only sequences, at TP 1
// and 2.
#include "training_data/exit_data_collector.hpp"
#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/thread_comm.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "tests/support/tiny_models.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace selfspec::testing {
namespace {

std::vector<BatchRequest> requests_for(std::int64_t vocab) {
  std::vector<BatchRequest> requests;
  for (int r = 0; r < 7; ++r) {
    BatchRequest request;
    for (int i = 0; i < 2 + (5 * r) % 9; ++i)
      request.prompt.push_back(static_cast<std::int32_t>((5 + 3 * r + 13 * i) % vocab));
    request.max_new_tokens = r % 3 == 2 ? 0 : 4 + r;
    if (r % 2 == 1) {
      request.sampling.temperature = 0.8;
      request.sampling.seed = 7 + static_cast<std::uint64_t>(r);
    }
    requests.push_back(request);
  }
  return requests;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

void expect_rows_equal(const ExitDataRows& got, const ExitDataRows& want, std::int64_t request) {
  EXPECT_EQ(got.hidden_size, want.hidden_size);
  EXPECT_EQ(got.top_k, want.top_k);
  EXPECT_TRUE(same_bits(got.hidden, want.hidden)) << "hidden, request " << request;
  EXPECT_TRUE(same_bits(got.sequence, want.sequence)) << "sequence, request " << request;
  EXPECT_TRUE(same_bits(got.position, want.position)) << "position, request " << request;
  EXPECT_TRUE(same_bits(got.token, want.token)) << "token, request " << request;
  EXPECT_TRUE(same_bits(got.next_token, want.next_token)) << "next_token, request " << request;
  EXPECT_TRUE(same_bits(got.topk_ids, want.topk_ids)) << "topk_ids, request " << request;
  EXPECT_TRUE(same_bits(got.topk_logprobs, want.topk_logprobs))
      << "topk_logprobs, request " << request;
}

// Collects with B sequences in flight, recording the inputs of `layers`, and compares each
// sequence's rows of each layer with the reference of that layer.
void expect_collector_equals_reference(LlamaModel& model, Communicator& comm, std::int64_t batch,
                                       const std::vector<std::int32_t>& eos,
                                       const std::vector<int>& layers = {2}) {
  const std::vector<BatchRequest> requests = requests_for(model.config().vocab_size);
  ExitDataCollectorOptions options;
  options.exit_layers = layers;
  options.top_k = 5;
  options.chunk = 12;
  options.batch = batch;
  options.eos_ids = eos;
  ExitDataCollector collector(model, comm, options);
  const std::int64_t first = 40;
  int sequences = 0;
  const bool finished = collector.run(
      requests, first,
      [&](std::int64_t request, std::vector<std::int32_t>&& tokens,
          std::vector<ExitDataRows>&& rows) {
        EXPECT_EQ(rows.size(), comm.is_root() ? layers.size() : 0U);
        for (std::size_t i = 0; i < layers.size(); ++i) {
          const ExitDataRows want =
              exit_data_targets(model, comm, tokens, first + request, options.targets(i));
          if (comm.is_root() && i < rows.size()) expect_rows_equal(rows[i], want, request);
        }
        EXPECT_GE(tokens.size(), requests[static_cast<std::size_t>(request)].prompt.size());
        ++sequences;
        return true;
      });
  EXPECT_TRUE(finished);
  EXPECT_EQ(sequences, static_cast<int>(requests.size()));
}

TEST(ExitDataCollector, RowsEqualTheTeacherForcedReference) {
  TempDir dir;
  LocalComm comm;
  const std::unique_ptr<LlamaModel> model =
      write_and_load_model(speculative_tiny_spec(3), dir.path(), comm);
  for (std::int64_t batch : {1, 3, 8}) expect_collector_equals_reference(*model, comm, batch, {});
  expect_collector_equals_reference(*model, comm, 4, {1, 2, 3, 5, 8, 13});
  // Several exit layers in one pass: each layer's rows are its own reference's; N = L (3) is the
  // final residual.
  expect_collector_equals_reference(*model, comm, 3, {}, {2, 1, 3});
}

TEST(ExitDataCollector, RefusesExitLayersOutOfRangeOrTwice) {
  TempDir dir;
  LocalComm comm;
  const std::unique_ptr<LlamaModel> model =
      write_and_load_model(speculative_tiny_spec(3), dir.path(), comm);
  for (const std::vector<int>& layers :
       {std::vector<int>{}, std::vector<int>{0}, std::vector<int>{4}, std::vector<int>{1, 2, 1}}) {
    ExitDataCollectorOptions options;
    options.exit_layers = layers;
    EXPECT_THROW(ExitDataCollector(*model, comm, options), Error);
  }
}

TEST(ExitDataCollector, RowsEqualTheReferenceAtTp2) {
  TempDir dir;
  write_tiny_checkpoint(tensor_parallel_tiny_spec(3), dir.path());
  run_model_ranks_in_both_orders(2, dir.path(), [&](LlamaModel& model, ThreadComm& comm) {
    expect_collector_equals_reference(model, comm, 3, {}, {1, 2});
  });
}

}  // namespace
}  // namespace selfspec::testing
