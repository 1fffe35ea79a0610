// Tensor parallelism on the GPU with two ranks on one device (NCCL refuses two ranks on one GPU, so
// the ranks are threads of this process, each with its own CUDA backend and stream on device 0):
// the sharded forwards (column- and row-parallel matmuls with their all-reduces), the vocab-sharded
// LM head, rank 0's control broadcasts and device-side verification run on the GPU. Two
// communicators: ThreadComm without device collectives (the backend stages its all-reduces
// through host memory) and CudaStagedComm (device-buffer collectives, as NcclComm offers them,
// staged through host memory by the communicator, so device-side verification exchanges its
// statistics through them). Checked: each rank's logit shard equals the one-rank logits' slice to
// rounding, and self-speculative greedy decoding (chains and trees, local and gathered logits) is
// token-identical to plain decoding at TP 2 and the same on both ranks. What stays unexecuted:
// NCCL itself with more than one rank (it needs a GPU per rank), and graphs recorded around
// collectives (NCCL's can be; these communicators' cannot).
#include "comm/local_comm.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/decoding_run.hpp"
#include "draft/tree_widths.hpp"
#include "tests/gpu/cuda_staged_comm.hpp"
#include "tests/support/decoding_runs.hpp"
#include "tests/support/gpu.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/thread_comm.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "verify/sharded_logits.hpp"

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace selfspec::testing {
namespace {

constexpr int kRanks = 2;

TinyModelSpec spec(DType dtype) {
  TinyModelSpec s;
  s.hidden = 128;
  s.heads = 8;
  s.kv_heads = 2;
  s.layers = 3;
  s.intermediate = 200;
  s.vocab = 301;  // splits 151 / 150
  s.scale = 1.5;
  s.dtype = dtype;
  return s;
}

enum class CommKind { kHostStaged, kDeviceStaged };

std::unique_ptr<Backend> make_backend(DeviceKind device) {
  return device == DeviceKind::kCuda ? make_cuda_backend(0) : make_cpu_backend();
}

// body(model, comm) on kRanks threads, each with its own backend (CUDA: on device 0) and the
// checkpoint's shard of that rank; rethrows the first rank's exception. Returns the device
// collectives rank 0 joined (CudaStagedComm only, which needs the CUDA backend).
int run_ranks_on(DeviceKind device, CommKind kind, const std::filesystem::path& dir,
                 const std::function<void(LlamaModel&, Communicator&)>& body) {
  ThreadHub hub(kRanks);
  std::vector<std::exception_ptr> errors(kRanks);
  int device_collectives = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      try {
        std::unique_ptr<Communicator> comm;
        CudaStagedComm* staged = nullptr;
        if (kind == CommKind::kDeviceStaged) {
          auto owned = std::make_unique<CudaStagedComm>(hub, r);
          staged = owned.get();
          comm = std::move(owned);
        } else {
          comm = std::make_unique<ThreadComm>(hub, r, false);
        }
        const std::unique_ptr<Backend> backend = make_backend(device);
        const std::unique_ptr<LlamaModel> model = load_model_on(*backend, dir, *comm);
        body(*model, *comm);
        if (r == 0 && staged != nullptr) device_collectives = staged->device_collectives();
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return device_collectives;
}

// Each rank's logit shard against the one-rank logits' slice, over every communicator of `kinds`.
void expect_shards_match_one_rank(DeviceKind device, std::span<const CommKind> kinds,
                                  const std::filesystem::path& dir) {
  const std::vector<std::int32_t> prompt = {1, 17, 4, 88, 23, 5, 61, 9, 42};
  LocalComm single_comm;
  const std::unique_ptr<Backend> single_backend = make_backend(device);
  const std::unique_ptr<LlamaModel> single = load_model_on(*single_backend, dir, single_comm);
  KvCache single_kv = single->make_kv_cache(32);
  const std::vector<float> full = forward_all_rows(*single, single_kv, prompt);
  const auto vocab = static_cast<std::size_t>(single->vocab_local());
  for (const CommKind kind : kinds) {
    SCOPED_TRACE(kind == CommKind::kHostStaged ? "host-staged" : "device-staged");
    std::vector<std::vector<float>> shards(kRanks);
    std::vector<std::int64_t> begins(kRanks);
    run_ranks_on(device, kind, dir, [&](LlamaModel& model, Communicator& comm) {
      KvCache kv = model.make_kv_cache(32);
      shards[static_cast<std::size_t>(comm.rank())] = forward_all_rows(model, kv, prompt);
      begins[static_cast<std::size_t>(comm.rank())] = model.shard().vocab.begin;
    });
    for (int r = 0; r < kRanks; ++r) {
      const std::vector<float>& shard = shards[static_cast<std::size_t>(r)];
      const std::size_t local = shard.size() / prompt.size();
      std::vector<double> expected;
      for (std::size_t t = 0; t < prompt.size(); ++t) {
        for (std::size_t i = 0; i < local; ++i) {
          expected.push_back(full[t * vocab + static_cast<std::size_t>(begins[r]) + i]);
        }
      }
      // Rank-order sums of two partial products against one product: rounding only.
      EXPECT_LT(relative_max_error(shard, expected), 1e-4) << "rank " << r;
    }
  }
}

// Self-speculative greedy decoding (chains, trees; local and gathered logits) equals plain decoding
// at two ranks, on both ranks, over every communicator of `kinds`.
void expect_lossless_at_two_ranks(DeviceKind device, std::span<const CommKind> kinds,
                                  const std::filesystem::path& dir) {
  const std::vector<std::int32_t> prompt = {1, 14, 3, 27, 9};
  GenerationOptions generation;
  generation.max_new_tokens = 40;
  generation.ignore_eos = true;
  for (const CommKind kind : kinds) {
    for (const LogitsMode mode : {LogitsMode::kLocal, LogitsMode::kGather}) {
      for (const char* tree : {"none", "0.6:8,1:4"}) {
        SCOPED_TRACE(::testing::Message()
                     << (kind == CommKind::kHostStaged ? "host-staged" : "device-staged") << " / "
                     << logits_mode_name(mode) << " / tree " << tree);
        std::vector<std::vector<std::int32_t>> plain(kRanks);
        std::vector<std::vector<std::int32_t>> drafted(kRanks);
        std::vector<std::string> paths(kRanks);
        const int device_collectives =
            run_ranks_on(device, kind, dir, [&](LlamaModel& model, Communicator& comm) {
              const auto r = static_cast<std::size_t>(comm.rank());
              GenerationOptions g = generation;
              g.logits = mode;
              plain[r] = autoregressive(model, comm, prompt, g, 160);
              ControllerOptions controller_options;
              controller_options.kind = "fixed";
              controller_options.max_draft = 4;
              g.tree = TreeWidths::parse(tree);
              g.tree_max_nodes = 40;
              drafted[r] =
                  speculative(model, comm, prompt, g,
                              LayerPlan::skipping(3, std::vector<int>{1}, std::vector<int>{0}),
                              controller_options, nullptr, nullptr, 160)
                      .tokens;
              paths[r] = std::string(verification_path(model, mode));
            });
        ASSERT_EQ(plain[0].size(), static_cast<std::size_t>(generation.max_new_tokens));
        EXPECT_EQ(drafted[0], plain[0]) << "lossless at TP 2";
        EXPECT_EQ(plain[1], plain[0]) << "both ranks generate the same tokens";
        EXPECT_EQ(drafted[1], drafted[0]);
        if (kind == CommKind::kDeviceStaged) {
          EXPECT_GT(device_collectives, 0) << "the device collectives were never used";
        }
        EXPECT_FALSE(paths[0].empty());
      }
    }
  }
}

constexpr CommKind kBothKinds[] = {CommKind::kHostStaged, CommKind::kDeviceStaged};
constexpr CommKind kHostKind[] = {CommKind::kHostStaged};

class CudaMultiRankTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    SELFSPEC_REQUIRE_GPU();
    write_tiny_checkpoint(spec(GetParam()), dir_.path());
  }
  TempDir dir_;
};

TEST_P(CudaMultiRankTest, EachRanksLogitShardMatchesTheOneRankLogits) {
  expect_shards_match_one_rank(DeviceKind::kCuda, kBothKinds, dir_.path());
}

TEST_P(CudaMultiRankTest, SelfSpeculativeGreedyEqualsPlainDecodingAtTwoRanks) {
  expect_lossless_at_two_ranks(DeviceKind::kCuda, kBothKinds, dir_.path());
}

// The same checks on CPU backends (host-staged collectives only: CudaStagedComm copies device
// memory), so the harness itself is exercised on every machine, with or without a GPU.
TEST(CudaMultiRankHarness, TheChecksPassOnCpuBackends) {
  TempDir dir;
  write_tiny_checkpoint(spec(DType::kF32), dir.path());
  expect_shards_match_one_rank(DeviceKind::kCpu, kHostKind, dir.path());
  expect_lossless_at_two_ranks(DeviceKind::kCpu, kHostKind, dir.path());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaMultiRankTest, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& param_info) {
                           return std::string(dtype_name(param_info.param));
                         });

}  // namespace
}  // namespace selfspec::testing
