// The CUDA backend end to end (label gpu; skipped with the reason where no device is usable):
// the model's logits against the CPU backend on checkpoints the test writes; token-count
// invariance on the GPU (decode and verification sizes up to 64 tokens, chains and trees:
// bit-identical rows); CUDA graphs replaying bit-identically to eager launches; the KV cache
// after rollbacks equal to a fresh run's; self-speculative greedy decoding token-identical to
// autoregressive decoding, chains and trees of up to 64 nodes; a feature-level head's forward
// against the CPU backend and its drafts token-identical; lookups grafted onto the model's draft
// (--lookup-tree: chain-configured rounds verifying trees) token-identical; with a bf16 KV cache
// (LlamaModel::set_kv_dtype): verification and tree rows bit-identical to decode steps, graphs
// bit-identical to eager launches, the cache after rollbacks equal to a fresh run's and greedy
// speculation (chains and trees) token-identical to autoregressive decoding; and the backend's
// guards (a forward past the KV capacity is an error).
#include "comm/local_comm.hpp"
#include "control/draft_length_controller.hpp"
#include "core/error.hpp"
#include "decode/decoder.hpp"
#include "decode/decoding_run.hpp"
#include "draft/feature_head_drafter.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "draft/lookup_source.hpp"
#include "draft/sourced_drafter.hpp"
#include "draft/tree_widths.hpp"
#include "model/attention_mask.hpp"
#include "tests/support/decoding_runs.hpp"
#include "tests/support/feature_head_file.hpp"
#include "tests/support/gpu.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

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

// The layer-skip draft of the speculative tests: layer 1's attention and layer 0's MLP skipped.
LayerPlan skip_layer_1_attention() {
  return LayerPlan::skipping(3, std::vector<int>{1}, std::vector<int>{0});
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
  // TreeNodeRowsAreBitIdenticalToTheirPathDecoded, in the model's KV dtype.
  void expect_tree_rows_equal_their_paths_decoded();
  // The decode steps' logits over tokens_, one token per forward, with graphs on or off.
  std::vector<std::vector<float>> decode_steps(bool graphs) {
    gpu_->set_graphs_enabled(graphs);
    KvCache kv = gpu_model_->make_kv_cache(64);
    std::vector<std::vector<float>> steps;
    for (std::int32_t token : tokens_) {
      steps.push_back(forward_all_rows(*gpu_model_, kv, std::span(&token, 1)));
    }
    return steps;
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
  // 80 tokens: above kSmallBatch (64), so the matmuls go through cuBLASLt.
  std::vector<std::int32_t> long_prompt;
  for (int i = 0; i < 80; ++i) long_prompt.push_back((i * 37 + 11) % 301);
  KvCache gpu_kv = gpu_model_->make_kv_cache(96);
  KvCache cpu_kv = cpu_model_->make_kv_cache(96);
  const std::vector<float> gpu = forward_all_rows(*gpu_model_, gpu_kv, long_prompt);
  const std::vector<float> cpu = forward_all_rows(*cpu_model_, cpu_kv, long_prompt);
  const std::vector<double> reference(cpu.begin(), cpu.end());
  EXPECT_LT(relative_max_error(gpu, reference), 3e-2) << "bf16/f16 activations in cuBLASLt";
}

TEST_P(CudaBackendTest, VerificationRowsAreBitIdenticalToDecodeSteps) {
  // Prefill 4 tokens, then 9 tokens at once (a verification) vs one at a time (decode).
  expect_batch_rows_equal_decode_steps(*gpu_model_, std::span(tokens_).first(4),
                                       std::span(tokens_).subspan(4), 64);
}

TEST_P(CudaBackendTest, VerificationsOfUpTo64TokensAreBitIdenticalToDecodeSteps) {
  // Verification sizes past one matmul tile (16 tokens): 17, 40 and 64 tokens at once against one
  // at a time.
  std::vector<std::int32_t> sequence;
  for (int i = 0; i < 68; ++i) sequence.push_back((i * 53 + 7) % 301);
  for (const std::size_t n : {std::size_t{17}, std::size_t{40}, std::size_t{64}}) {
    SCOPED_TRACE(::testing::Message() << n << " tokens");
    expect_batch_rows_equal_decode_steps(*gpu_model_, std::span(sequence).first(4),
                                         std::span(sequence).subspan(4, n), 80);
  }
}

// A token tree of 24 nodes verified in one forward: each node's logits equal, bit for bit, those
// of its path decoded one token at a time after the prefix (where its ancestors sit at other
// cache slots than in the tree).
TEST_P(CudaBackendTest, TreeNodeRowsAreBitIdenticalToTheirPathDecoded) {
  expect_tree_rows_equal_their_paths_decoded();
}

void CudaBackendTest::expect_tree_rows_equal_their_paths_decoded() {
  const std::vector<std::int32_t> prefix(tokens_.begin(), tokens_.begin() + 4);
  const int n = 24;
  std::mt19937 rng(41);
  std::vector<int> parent(n, -1);
  std::vector<int> depth(n, 0);
  for (int i = 1; i < n; ++i) {
    parent[static_cast<std::size_t>(i)] = std::uniform_int_distribution<int>(-1, i - 1)(rng);
    const int p = parent[static_cast<std::size_t>(i)];
    depth[static_cast<std::size_t>(i)] = p < 0 ? 0 : depth[static_cast<std::size_t>(p)] + 1;
  }
  std::vector<std::uint8_t> ancestors(static_cast<std::size_t>(n * n), 0);
  std::vector<std::int32_t> tree_tokens(n);
  std::vector<std::int32_t> positions(n);
  for (int i = 0; i < n; ++i) {
    for (int a = i; a >= 0; a = parent[static_cast<std::size_t>(a)]) {
      ancestors[static_cast<std::size_t>(i * n + a)] = 1;
    }
    tree_tokens[static_cast<std::size_t>(i)] = (i * 29 + 5) % 301;
    positions[static_cast<std::size_t>(i)] =
        static_cast<std::int32_t>(prefix.size()) + depth[static_cast<std::size_t>(i)];
  }
  const AttentionMask mask = AttentionMask::tree(n, ancestors);
  KvCache kv = gpu_model_->make_kv_cache(64);
  forward_all_rows(*gpu_model_, kv, prefix);
  const std::vector<float> tree =
      forward_all_rows(*gpu_model_, kv, tree_tokens, nullptr, &mask, positions);
  int deep_nodes = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<std::int32_t> path;
    for (int a = i; a >= 0; a = parent[static_cast<std::size_t>(a)]) {
      path.insert(path.begin(), tree_tokens[static_cast<std::size_t>(a)]);
    }
    deep_nodes += path.size() >= 3 ? 1 : 0;
    KvCache single = gpu_model_->make_kv_cache(64);
    forward_all_rows(*gpu_model_, single, prefix);
    std::vector<float> last;
    for (const std::int32_t token : path) {
      last = forward_all_rows(*gpu_model_, single, std::span(&token, 1));
    }
    EXPECT_TRUE(bit_identical(last, row(tree, static_cast<std::size_t>(i))))
        << "node " << i << " at depth " << depth[static_cast<std::size_t>(i)];
  }
  EXPECT_GT(deep_nodes, 0) << "the random tree has no node below depth 1";
}

TEST_P(CudaBackendTest, AForwardPastTheKvCapacityIsAnError) {
  KvCache kv = gpu_model_->make_kv_cache(8);
  forward_all_rows(*gpu_model_, kv, std::span(tokens_).subspan(0, 6));
  EXPECT_THROW(forward_all_rows(*gpu_model_, kv, std::span(tokens_).subspan(6, 3)), Error);
}

// The same decode sequence with graphs (eager, capture, then replays) and without, over an f32
// and a bf16 KV cache (rope_write_kv and attention on bf16 elements in the graphs).
TEST_P(CudaBackendTest, GraphReplaysAreBitIdenticalToEagerLaunches) {
  for (const DType kv_dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(kv_dtype));
    gpu_model_->set_kv_dtype(kv_dtype);
    ASSERT_EQ(gpu_model_->make_kv_cache(8).dtype(), kv_dtype);
    const auto eager = decode_steps(false);
    const auto graphed = decode_steps(true);
    ASSERT_EQ(eager.size(), graphed.size());
    for (std::size_t i = 0; i < eager.size(); ++i) {
      EXPECT_TRUE(bit_identical(eager[i], graphed[i])) << "step " << i;
    }
  }
}

// After a rollback and new tokens, the cache's live slots equal a fresh run's, byte for byte, in
// an f32 and in a bf16 cache.
TEST_P(CudaBackendTest, KvCacheAfterRollbackEqualsAFreshRun) {
  for (const DType kv_dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(kv_dtype));
    gpu_model_->set_kv_dtype(kv_dtype);
    KvCache kv = gpu_model_->make_kv_cache(64);
    ASSERT_EQ(kv.dtype(), kv_dtype);
    forward_all_rows(*gpu_model_, kv, std::span(tokens_).subspan(0, 10));
    kv.truncate(6);
    const std::vector<std::int32_t> b = {31, 32, 33, 34};
    forward_all_rows(*gpu_model_, kv, b);
    std::vector<std::int32_t> sequence(tokens_.begin(), tokens_.begin() + 6);
    sequence.insert(sequence.end(), b.begin(), b.end());
    KvCache fresh = gpu_model_->make_kv_cache(64);
    forward_all_rows(*gpu_model_, fresh, sequence);
    const std::size_t row_bytes = static_cast<std::size_t>(kv.head_dim()) * kv.element_bytes();
    const std::size_t bytes = static_cast<std::size_t>(kv.capacity() * kv.kv_heads()) * row_bytes;
    std::vector<std::uint8_t> a(bytes), c(bytes);
    for (std::int64_t l = 0; l < kv.num_layers(); ++l) {
      for (const bool keys : {true, false}) {
        gpu_->download(a.data(), keys ? kv.keys(l) : kv.values(l), bytes);
        gpu_->download(c.data(), keys ? fresh.keys(l) : fresh.values(l), bytes);
        for (std::int64_t h = 0; h < kv.kv_heads(); ++h) {
          const std::size_t offset = static_cast<std::size_t>(h * kv.capacity()) * row_bytes;
          EXPECT_EQ(std::memcmp(a.data() + offset, c.data() + offset,
                                static_cast<std::size_t>(kv.length()) * row_bytes),
                    0)
              << "layer " << l << (keys ? " keys" : " values");
        }
      }
    }
  }
}

TEST_P(CudaBackendTest, SelfSpeculativeGreedyEqualsAutoregressive) {
  GenerationOptions generation;
  generation.max_new_tokens = 40;
  generation.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {1, 14, 3, 27, 9};
  const std::vector<std::int32_t> expected =
      autoregressive(*gpu_model_, comm_, prompt, generation, 64);
  for (const char* kind : {"fixed", "adaptive", "thompson"}) {
    ControllerOptions controller_options;
    controller_options.kind = kind;
    controller_options.max_draft = 8;
    EXPECT_EQ(speculative(*gpu_model_, comm_, prompt, generation, skip_layer_1_attention(),
                          controller_options, nullptr, nullptr, 64)
                  .tokens,
              expected)
        << kind;
  }
}

// With a bf16 KV cache: verification rows (9 and 64 tokens at once) and a tree's node rows are
// bit-identical to decode steps, and self-speculative greedy decoding equals autoregressive
// decoding (both over bf16 caches) token for token: chains under every controller, and trees of
// up to 20 and 63 nodes (KvCache::keep_rows moving 2-byte elements).
TEST_P(CudaBackendTest, Bf16KvCacheRowsAreBitIdenticalToDecodeSteps) {
  gpu_model_->set_kv_dtype(DType::kBF16);
  ASSERT_EQ(gpu_model_->make_kv_cache(8).dtype(), DType::kBF16);
  expect_batch_rows_equal_decode_steps(*gpu_model_, std::span(tokens_).first(4),
                                       std::span(tokens_).subspan(4), 64);
  std::vector<std::int32_t> sequence;
  for (int i = 0; i < 68; ++i) sequence.push_back((i * 53 + 7) % 301);
  expect_batch_rows_equal_decode_steps(*gpu_model_, std::span(sequence).first(4),
                                       std::span(sequence).subspan(4, 64), 80);
  expect_tree_rows_equal_their_paths_decoded();
}

TEST_P(CudaBackendTest, SelfSpeculativeGreedyWithABf16KvCacheEqualsAutoregressive) {
  gpu_model_->set_kv_dtype(DType::kBF16);
  ASSERT_EQ(gpu_model_->make_kv_cache(8).dtype(), DType::kBF16);
  GenerationOptions generation;
  generation.max_new_tokens = 40;
  generation.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {1, 14, 3, 27, 9};
  const std::int64_t capacity = 192;  // room for a tree's nodes past the new tokens
  const std::vector<std::int32_t> expected =
      autoregressive(*gpu_model_, comm_, prompt, generation, capacity);
  for (const char* kind : {"fixed", "adaptive", "thompson"}) {
    ControllerOptions controller_options;
    controller_options.kind = kind;
    controller_options.max_draft = 8;
    EXPECT_EQ(speculative(*gpu_model_, comm_, prompt, generation, skip_layer_1_attention(),
                          controller_options, nullptr, nullptr, capacity)
                  .tokens,
              expected)
        << kind;
  }
  ControllerOptions controller_options;
  controller_options.kind = "fixed";
  controller_options.max_draft = 8;
  for (const int max_nodes : {20, 63}) {
    GenerationOptions g = generation;
    g.tree = TreeWidths::parse("0.6:8,1:4");
    g.tree_max_nodes = max_nodes;
    const GenerationResult r = speculative(*gpu_model_, comm_, prompt, g, skip_layer_1_attention(),
                                           controller_options, nullptr, nullptr, capacity);
    EXPECT_EQ(r.tokens, expected) << "tree of at most " << max_nodes << " nodes";
    EXPECT_GT(r.stats.alternatives, 0) << "no tree was verified";
  }
}

// A feature-level head (model/feature_head.hpp) on the device: its forward over the target's final
// residual rows matches the CPU backend's, and its drafts (chains, a tree, the first round's rows
// in several forwards) leave greedy output token-identical.
TEST_P(CudaBackendTest, FeatureHeadForwardMatchesTheCpuAndDraftsLosslessly) {
  attach_feature_head(*gpu_model_, dir_.path(), 3);
  attach_feature_head(*cpu_model_, dir_.path(), 3);
  const std::vector<float> residual = final_residual_rows(*cpu_model_, tokens_);
  const std::size_t rows = tokens_.size() - 1;
  const auto hidden = static_cast<std::size_t>(cpu_model_->config().hidden_size);
  const std::span<const float> features = std::span(residual).first(rows * hidden);
  const std::span<const std::int32_t> next = std::span(tokens_).subspan(1);
  KvCache cpu_kv = cpu_model_->make_kv_cache(64);
  KvCache gpu_kv = gpu_model_->make_kv_cache(64);
  const std::vector<float> cpu = feature_forward_logits(*cpu_model_, cpu_kv, features, next, 0);
  EXPECT_LT(relative_max_error(feature_forward_logits(*gpu_model_, gpu_kv, features, next, 0),
                               std::vector<double>(cpu.begin(), cpu.end())),
            1e-4);

  GenerationOptions generation;
  generation.max_new_tokens = 40;
  generation.ignore_eos = true;
  generation.prefill_chunk = 3;
  const std::vector<std::int32_t> prompt = {1, 14, 3, 27, 9, 60, 8};
  const std::vector<std::int32_t> expected =
      autoregressive(*gpu_model_, comm_, prompt, generation, 64);
  for (const char* tree : {"none", "1:3"}) {
    for (int k : {1, 3}) {
      ControllerOptions controller;
      controller.kind = "fixed";
      controller.max_draft = k;
      GenerationOptions g = generation;
      g.tree = TreeWidths::parse(tree);
      FeatureHeadDrafter drafter(3, gpu_model_->config().hidden_size, "seeded head");
      const GenerationResult r = speculative(*gpu_model_, comm_, prompt, g, LayerPlan::full(3),
                                             controller, nullptr, &drafter, 64);
      EXPECT_EQ(r.tokens, expected) << tree << " K " << k;
      EXPECT_GT(r.stats.drafted, 0) << tree << " K " << k;
    }
  }
}

// Lookups grafted onto the model's draft as branches of one tree (--lookup-tree): over a layer-skip
// draft and over a feature head, chains and 1:2 trees, the device verifies the merged trees (a
// chain-configured round may verify a tree) and greedy output stays token-identical. The prompt
// repeats itself, so the lookups fire from the first round.
TEST_P(CudaBackendTest, GraftedLookupsKeepTheOutputTokenIdentical) {
  attach_feature_head(*gpu_model_, dir_.path(), 3);
  GenerationOptions generation;
  generation.max_new_tokens = 40;
  generation.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {1, 14, 3, 27, 9, 40, 14, 3, 27, 9, 5, 14, 3};
  const std::vector<std::int32_t> expected =
      autoregressive(*gpu_model_, comm_, prompt, generation, 64);
  const std::int64_t hidden = gpu_model_->config().hidden_size;
  for (const bool feature : {false, true}) {
    for (const char* tree : {"none", "1:2"}) {
      ControllerOptions controller;
      controller.kind = "fixed";
      controller.max_draft = 2;
      GenerationOptions g = generation;
      g.tree = TreeWidths::parse(tree);
      const LayerPlan plan = feature ? LayerPlan::full(3) : skip_layer_1_attention();
      std::unique_ptr<Drafter> model_drafter;
      if (feature) {
        model_drafter = std::make_unique<FeatureHeadDrafter>(3, hidden, "seeded head");
      } else {
        model_drafter = std::make_unique<LayerSkipDrafter>(plan, "skips");
      }
      std::vector<std::unique_ptr<DraftSource>> sources;
      sources.push_back(make_lookup_source({3, 1, 3}));
      SourcedDrafter drafter(std::move(sources), std::move(model_drafter),
                             SourcedDrafterOptions{.tree = true});
      const GenerationResult r =
          speculative(*gpu_model_, comm_, prompt, g, plan, controller, nullptr, &drafter, 64);
      const std::string label = std::string(feature ? "feature head" : "skips") + " / " + tree;
      EXPECT_EQ(r.tokens, expected) << label;
      EXPECT_GT(drafter.state()["lookup"]["tree_rounds"].get<int>(), 0) << label;
    }
  }
}

// Trees past one matmul tile: up to 40 and 64 draft nodes per verification (SWIFT-like widths), a
// layer-skip draft; the output equals autoregressive decoding token for token.
TEST_P(CudaBackendTest, SelfSpeculativeTreesOfUpTo64NodesEqualAutoregressive) {
  GenerationOptions generation;
  generation.max_new_tokens = 40;
  generation.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {1, 14, 3, 27, 9};
  const std::int64_t capacity = 192;  // room for a tree's nodes past the new tokens
  const std::vector<std::int32_t> expected =
      autoregressive(*gpu_model_, comm_, prompt, generation, capacity);
  ControllerOptions controller_options;
  controller_options.kind = "fixed";
  controller_options.max_draft = 8;
  for (const int max_nodes : {20, 40, 63}) {
    GenerationOptions g = generation;
    g.tree = TreeWidths::parse("0.6:8,1:4");
    g.tree_max_nodes = max_nodes;
    const GenerationResult r = speculative(*gpu_model_, comm_, prompt, g, skip_layer_1_attention(),
                                           controller_options, nullptr, nullptr, capacity);
    EXPECT_EQ(r.tokens, expected) << "tree of at most " << max_nodes << " nodes";
    EXPECT_GT(r.stats.alternatives, 16) << "the trees stayed small";
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
