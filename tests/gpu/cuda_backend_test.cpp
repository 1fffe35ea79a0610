// The CUDA backend end to end (label gpu; skipped with the reason where no device is usable):
// the model's logits against the CPU backend on checkpoints the test writes; token-count
// invariance on the GPU (decode and verification sizes: bit-identical rows); CUDA graphs
// replaying bit-identically to eager launches; the KV cache after rollbacks equal to a fresh
// run's; and self-speculative greedy decoding token-identical to autoregressive decoding.
#include "comm/local_comm.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/decoder.hpp"
#include "decode/decoding_run.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "tests/support/gpu.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace selfspec::testing {
namespace {

struct Variant {
  std::string name;
  TinyModelSpec spec;
};
void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.name;
}

std::vector<Variant> variants() {
  TinyModelSpec gqa;
  gqa.hidden = 128;
  gqa.heads = 8;
  gqa.kv_heads = 2;
  gqa.layers = 3;
  gqa.intermediate = 200;  // not a multiple of the 8-element vector width
  gqa.vocab = 301;
  gqa.scale = 1.5;
  TinyModelSpec bias = gqa;
  bias.attention_bias = true;
  bias.dtype = DType::kBF16;
  TinyModelSpec f16 = gqa;
  f16.dtype = DType::kF16;
  f16.kv_heads = 8;
  return {{"gqa_f32", gqa}, {"bias_bf16", bias}, {"mha_f16", f16}};
}

class CudaBackendTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    SELFSPEC_REQUIRE_GPU();
    write_tiny_checkpoint(GetParam().spec, dir_.path());
    gpu_ = make_cuda_backend(0);
    gpu_model_ = load_model_on(*gpu_, dir_.path(), comm_);
    // The reference: the CPU backend on the same weight values widened to f32 (exact), so that
    // both sides multiply f32 activations. The CPU's own bf16 kernels round the activations to
    // bf16 first (kernels/cpu/bf16_matmul.hpp), which moves bf16 logits by ~1e-2, while the
    // GPU's matmul_small_batch keeps them in f32.
    cpu_model_ = load_model(dir_.path(), comm_, DType::kF32);
  }
  std::vector<float> row(const std::vector<float>& logits, std::size_t r) const {
    const auto v = static_cast<std::size_t>(gpu_model_->vocab_local());
    return {logits.begin() + static_cast<std::ptrdiff_t>(r * v),
            logits.begin() + static_cast<std::ptrdiff_t>((r + 1) * v)};
  }

  TempDir dir_;
  LocalComm comm_;
  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<LlamaModel> gpu_model_;
  std::unique_ptr<LlamaModel> cpu_model_;
  const std::vector<std::int32_t> tokens_ = {1, 17, 4, 88, 23, 5, 61, 9, 42, 77, 13, 30, 2};
};

TEST_P(CudaBackendTest, LogitsMatchTheCpuBackend) {
  KvCache gpu_kv = gpu_model_->make_kv_cache(64);
  KvCache cpu_kv = cpu_model_->make_kv_cache(64);
  const std::vector<float> gpu = forward_all_rows(*gpu_model_, gpu_kv, tokens_);
  const std::vector<float> cpu = forward_all_rows(*cpu_model_, cpu_kv, tokens_);
  const std::vector<double> reference(cpu.begin(), cpu.end());
  EXPECT_LT(relative_max_error(gpu, reference), 1e-4);
}

TEST_P(CudaBackendTest, PrefillThroughCublasLtMatchesTheCpuBackend) {
  std::vector<std::int32_t> long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt.push_back((i * 37 + 11) % 301);
  KvCache gpu_kv = gpu_model_->make_kv_cache(64);
  KvCache cpu_kv = cpu_model_->make_kv_cache(64);
  const std::vector<float> gpu = forward_all_rows(*gpu_model_, gpu_kv, long_prompt);
  const std::vector<float> cpu = forward_all_rows(*cpu_model_, cpu_kv, long_prompt);
  const std::vector<double> reference(cpu.begin(), cpu.end());
  EXPECT_LT(relative_max_error(gpu, reference), 3e-2) << "bf16/f16 activations in cuBLASLt";
}

TEST_P(CudaBackendTest, VerificationRowsAreBitIdenticalToDecodeSteps) {
  // Prefill 4 tokens, then 9 tokens at once (a verification) vs one at a time (decode).
  const std::vector<std::int32_t> prefix(tokens_.begin(), tokens_.begin() + 4);
  const std::vector<std::int32_t> rest(tokens_.begin() + 4, tokens_.end());
  KvCache batch_kv = gpu_model_->make_kv_cache(64);
  forward_all_rows(*gpu_model_, batch_kv, prefix);
  const std::vector<float> batch = forward_all_rows(*gpu_model_, batch_kv, rest);
  KvCache single_kv = gpu_model_->make_kv_cache(64);
  forward_all_rows(*gpu_model_, single_kv, prefix);
  for (std::size_t t = 0; t < rest.size(); ++t) {
    const std::vector<float> single =
        forward_all_rows(*gpu_model_, single_kv, std::span(rest).subspan(t, 1));
    EXPECT_TRUE(bit_identical(single, row(batch, t))) << "token " << t;
  }
}

TEST_P(CudaBackendTest, GraphReplaysAreBitIdenticalToEagerLaunches) {
  // The same decode sequence with graphs (eager, capture, then replays) and without.
  const auto decode = [&](bool graphs) {
    gpu_->set_graphs_enabled(graphs);
    KvCache kv = gpu_model_->make_kv_cache(64);
    std::vector<std::vector<float>> steps;
    for (std::int32_t token : tokens_) {
      steps.push_back(forward_all_rows(*gpu_model_, kv, std::span(&token, 1)));
    }
    return steps;
  };
  const auto eager = decode(false);
  const auto graphed = decode(true);
  ASSERT_EQ(eager.size(), graphed.size());
  for (std::size_t i = 0; i < eager.size(); ++i) {
    EXPECT_TRUE(bit_identical(eager[i], graphed[i])) << "step " << i;
  }
}

TEST_P(CudaBackendTest, KvCacheAfterRollbackEqualsAFreshRun) {
  KvCache kv = gpu_model_->make_kv_cache(64);
  forward_all_rows(*gpu_model_, kv, std::span(tokens_).subspan(0, 10));
  kv.truncate(6);
  const std::vector<std::int32_t> b = {31, 32, 33, 34};
  forward_all_rows(*gpu_model_, kv, b);
  std::vector<std::int32_t> sequence(tokens_.begin(), tokens_.begin() + 6);
  sequence.insert(sequence.end(), b.begin(), b.end());
  KvCache fresh = gpu_model_->make_kv_cache(64);
  forward_all_rows(*gpu_model_, fresh, sequence);
  const auto bytes =
      static_cast<std::size_t>(kv.capacity() * kv.head_dim() * kv.kv_heads()) * sizeof(float);
  std::vector<float> a(bytes / sizeof(float)), c(bytes / sizeof(float));
  for (std::int64_t l = 0; l < kv.num_layers(); ++l) {
    for (const bool keys : {true, false}) {
      gpu_->download(a.data(), keys ? kv.keys(l) : kv.values(l), bytes);
      gpu_->download(c.data(), keys ? fresh.keys(l) : fresh.values(l), bytes);
      for (std::int64_t h = 0; h < kv.kv_heads(); ++h) {
        const auto offset = static_cast<std::size_t>(h * kv.capacity() * kv.head_dim());
        EXPECT_EQ(
            std::memcmp(a.data() + offset, c.data() + offset,
                        static_cast<std::size_t>(kv.length() * kv.head_dim()) * sizeof(float)),
            0)
            << "layer " << l << (keys ? " keys" : " values");
      }
    }
  }
}

TEST_P(CudaBackendTest, SelfSpeculativeGreedyEqualsAutoregressive) {
  GenerationOptions generation;
  generation.max_new_tokens = 40;
  generation.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {1, 14, 3, 27, 9};
  KvCache kv = gpu_model_->make_kv_cache(64);
  Decoder plain(*gpu_model_, comm_);
  const std::vector<std::int32_t> expected = plain.generate(prompt, generation, kv).tokens;
  for (const char* kind : {"fixed", "adaptive", "thompson"}) {
    LayerSkipDrafter drafter(LayerPlan::skipping(3, std::vector<int>{1}, std::vector<int>{0}),
                             "test");
    ControllerOptions controller_options;
    controller_options.kind = kind;
    controller_options.max_draft = 8;
    auto controller = make_draft_length_controller(controller_options);
    Decoder decoder(*gpu_model_, comm_, drafter, *controller);
    KvCache spec_kv = gpu_model_->make_kv_cache(64);
    EXPECT_EQ(decoder.generate(prompt, generation, spec_kv).tokens, expected) << kind;
  }
}

// Device-side verification (backend/shard_reductions.hpp) against the host path on the same GPU
// logits: --logits local decides from kernels' reductions of the rows left in device memory,
// --logits gather from the rows copied to the host and the host arithmetic. Greedy output is the
// same token for token, and sampling draws the same tokens for the same seed, in plain and
// self-speculative decoding (the device sums agree with the host's to rounding, so a draw could
// differ only within ~1e-15 of a boundary).
TEST_P(CudaBackendTest, DeviceSideVerificationDecidesLikeTheHostPath) {
  EXPECT_EQ(verification_path(*gpu_model_, LogitsMode::kLocal), "device");
  EXPECT_EQ(verification_path(*gpu_model_, LogitsMode::kGather), "device-gather");
  EXPECT_EQ(verification_path(*cpu_model_, LogitsMode::kLocal), "host");
  const std::vector<std::int32_t> prompt = {1, 14, 3, 27, 9};
  for (const SamplingParams sampling :
       {SamplingParams{0.0, 0, 1.0, 0}, SamplingParams{0.8, 0, 1.0, 21},
        SamplingParams{1.3, 0, 1.0, 22}}) {
    SCOPED_TRACE(::testing::Message() << "temperature " << sampling.temperature);
    std::vector<std::vector<std::int32_t>> outputs;
    for (const LogitsMode mode : {LogitsMode::kLocal, LogitsMode::kGather}) {
      GenerationOptions generation;
      generation.max_new_tokens = 40;
      generation.ignore_eos = true;
      generation.logits = mode;
      generation.sampling = sampling;
      KvCache kv = gpu_model_->make_kv_cache(64);
      Decoder plain(*gpu_model_, comm_);
      outputs.push_back(plain.generate(prompt, generation, kv).tokens);
      LayerSkipDrafter drafter(LayerPlan::skipping(3, std::vector<int>{1}, std::vector<int>{0}),
                               "test");
      ControllerOptions controller_options;
      controller_options.kind = "fixed";
      controller_options.max_draft = 4;
      auto controller = make_draft_length_controller(controller_options);
      Decoder decoder(*gpu_model_, comm_, drafter, *controller);
      KvCache spec_kv = gpu_model_->make_kv_cache(64);
      outputs.push_back(decoder.generate(prompt, generation, spec_kv).tokens);
    }
    EXPECT_EQ(outputs[0], outputs[2]) << "plain decoding: device vs host verification";
    EXPECT_EQ(outputs[1], outputs[3]) << "self-speculative: device vs host verification";
    if (sampling.greedy()) {
      EXPECT_EQ(outputs[0], outputs[1]) << "greedy speculation is lossless";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaBackendTest, ::testing::ValuesIn(variants()),
                         [](const auto& test_info) { return test_info.param.name; });

}  // namespace
}  // namespace selfspec::testing
