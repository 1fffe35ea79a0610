// GGUF weights on the GPU (kernels/cuda/quant_matmul.cu over the quantized rows of
// kernels/cuda/quant_rows.hpp), held bit for bit to the scalar reference
// (backend/quant_rows_builder.hpp), which the CPU tests hold bit for bit to the CPU kernels:
//  * the activation quantizer equals the CPU's (zeros, NaN, infinities and subnormals included);
//  * every quantized format's product equals the reference at every token count 1..64 (so it is
//    token-count invariant), on shapes with a partial block of warps and K-format slices that
//    start inside a super-block;
//  * the quantized embedding lookup equals the reference dequantization, zeros outside the shard,
//    and a whole matrix dequantized to bf16 (a prefill's cuBLASLt weights) is that dequantization
//    rounded;
//  * a prefill of more than 64 tokens (through bf16 and cuBLASLt) stays close to the CPU's;
//  * end to end, a GGUF model in Q4_0, Q8_0, Q4_K and Q6_K run natively on the GPU gives the CPU
//    backend's logits (quantized products bit-identical; attention and norms to rounding), its
//    verification rows equal its decode steps bit for bit, and self-speculative greedy decoding
//    equals plain decoding.
#include "backend/quant_rows_builder.hpp"
#include "comm/local_comm.hpp"
#include "control/draft_length_controller.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "kernels/cuda/quant_rows.hpp"
#include "kernels/shared_math.hpp"
#include "model/llama_model.hpp"
#include "model/llama_weights.hpp"
#include "model_io/gguf_export.hpp"
#include "model_io/gguf_file.hpp"
#include "model_io/gguf_model_config.hpp"
#include "model_io/gguf_tensor_source.hpp"
#include "tests/support/decoding_runs.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "tests/unit/kernels/quant_test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

using cpu::test::GgufMatrix;
using cpu::test::random_gguf_matrix;

struct Slice {
  std::int64_t rows;
  std::int64_t blocks;
  std::int64_t skip;
  std::int64_t cols;
};

std::vector<Slice> slices(WeightFormat format) {
  if (quant_rows_layout(format, 1, 32).k_quant) {
    return {{19, 2, 0, 512}, {21, 3, 96, 512}, {5, 2, 224, 64}, {130, 16, 0, 4096}};
  }
  return {{19, 8, 0, 256}, {33, 3, 0, 96}, {1, 40, 0, 1280}, {130, 128, 0, 4096}};
}

std::vector<float> activations(std::mt19937& rng, std::int64_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = pick(rng) == 0 ? 30.0f * normal(rng) : normal(rng);
  if (n >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  return x;
}

// The quantized rows of a slice on the device.
struct DeviceRows {
  std::vector<std::byte> host;
  DeviceBuffer<std::byte> device;
  QuantWeight view;
};

DeviceRows upload_rows(const GgufMatrix& m, const Slice& s) {
  DeviceRows d;
  d.host = build_quant_rows({m.format, s.rows, s.cols, m.data.data(), m.row_bytes, s.skip});
  d.device = DeviceBuffer<std::byte>(d.host);
  d.view = QuantWeight{m.format, d.device.get(), s.rows, s.cols};
  return d;
}

std::vector<float> gpu_product(const DeviceRows& rows, const std::vector<float>& x,
                               std::int64_t tokens) {
  DeviceBuffer<float> d_x(x);
  DeviceBuffer<std::uint8_t> workspace(quant_activations_bytes(tokens, rows.view.cols));
  DeviceBuffer<float> y(static_cast<std::size_t>(tokens * rows.view.rows));
  y.poison();
  quantize_activations(d_x.get(), tokens, rows.view.cols, workspace.get(), nullptr);
  quant_matmul(workspace.get(), tokens, rows.view, y.get(), nullptr);
  return y.download();
}

// The six arrays of quantized activations (quant_activations_layout's): in a device workspace's
// download, or the CPU quantizer's.
struct ActivationArrays {
  const void* q;
  const void* dx;
  const void* s;
  const void* dxs;
  const void* s32;
  const void* s16;
};
ActivationArrays arrays_of(const std::vector<std::uint8_t>& workspace, std::int64_t tokens,
                           std::int64_t cols) {
  const QuantActivationsLayout l = quant_activations_layout(tokens, cols);
  const std::uint8_t* b = workspace.data();
  return {b + l.q, b + l.dx, b + l.s, b + l.dxs, b + l.s32, b + l.s16};
}
ActivationArrays arrays_of(const cpu::QuantizedActivations& a) {
  return {a.q.data(), a.dx.data(), a.s.data(), a.dxs.data(), a.s32.data(), a.s16.data()};
}
void expect_same_activations(const ActivationArrays& got, const ActivationArrays& expected,
                             std::int64_t tokens, std::int64_t cols) {
  const auto values = static_cast<std::size_t>(tokens * cols);
  const std::size_t groups = values / 32;
  EXPECT_EQ(std::memcmp(got.q, expected.q, values), 0) << "q";
  EXPECT_EQ(std::memcmp(got.dx, expected.dx, groups * 4), 0) << "dx";
  EXPECT_EQ(std::memcmp(got.s, expected.s, groups * 4), 0) << "s";
  EXPECT_EQ(std::memcmp(got.dxs, expected.dxs, groups * 4), 0) << "dxs";
  EXPECT_EQ(std::memcmp(got.s32, expected.s32, groups * 4), 0) << "s32";
  EXPECT_EQ(std::memcmp(got.s16, expected.s16, groups * 8), 0) << "s16";
}

TEST(CudaQuantizeActivations, EqualsTheCpuQuantizerBitForBit) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(81);
  const std::int64_t tokens = 5;
  const std::int64_t cols = 320;
  std::vector<float> x = activations(rng, tokens * cols);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[40 + 64] = std::numeric_limits<float>::infinity();
  x[100] = -std::numeric_limits<float>::infinity();
  x[200] = 1e-40f;  // subnormal
  for (int i = 0; i < 32; ++i) x[static_cast<std::size_t>(cols + 32 + i)] = 1e-42f;
  cpu::QuantizedActivations cpu_act;
  cpu::quantize_activations(x.data(), tokens, cols, cpu_act);
  DeviceBuffer<float> d_x(x);
  DeviceBuffer<std::uint8_t> workspace(quant_activations_bytes(tokens, cols));
  workspace.poison();
  quantize_activations(d_x.get(), tokens, cols, workspace.get(), nullptr);
  expect_same_activations(arrays_of(workspace.download(), tokens, cols), arrays_of(cpu_act), tokens,
                          cols);
}

// The RMSNorm that quantizes its output (the quantized models' fused norm) writes the bytes that
// rmsnorm then quantize_activations write, on the register path (320 and 4096 columns) and the
// loop path (over 8192).
TEST(CudaQuantizeActivations, TheNormQuantizingItsOutputEqualsRmsnormThenQuantize) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(86);
  const float eps = 1e-5f;
  for (const std::int64_t cols : {std::int64_t{320}, std::int64_t{4096}, std::int64_t{8224}}) {
    for (const std::int64_t tokens : {std::int64_t{1}, std::int64_t{5}}) {
      SCOPED_TRACE(::testing::Message() << cols << " columns, " << tokens << " tokens");
      const std::vector<float> x = activations(rng, tokens * cols);
      std::vector<float> weight = activations(rng, cols);
      DeviceBuffer<float> d_x(x);
      DeviceBuffer<float> d_weight(weight);
      DeviceBuffer<float> y(x.size());
      DeviceBuffer<std::uint8_t> separate(quant_activations_bytes(tokens, cols));
      DeviceBuffer<std::uint8_t> fused(quant_activations_bytes(tokens, cols));
      separate.poison();
      fused.poison();
      rmsnorm(d_x.get(), d_weight.get(), eps, tokens, cols, y.get(), nullptr);
      quantize_activations(y.get(), tokens, cols, separate.get(), nullptr);
      rmsnorm_quantize(d_x.get(), d_weight.get(), eps, tokens, cols, fused.get(), nullptr);
      const std::vector<std::uint8_t> a = fused.download();
      const std::vector<std::uint8_t> b = separate.download();
      expect_same_activations(arrays_of(a, tokens, cols), arrays_of(b, tokens, cols), tokens, cols);
    }
  }
  DeviceBuffer<float> d_x(std::vector<float>(48, 1.0f));
  DeviceBuffer<std::uint8_t> workspace(quant_activations_bytes(1, 48));
  EXPECT_THROW(rmsnorm_quantize(d_x.get(), d_x.get(), eps, 1, 48, workspace.get(), nullptr),
               Error);  // not whole groups of 32
}

class CudaQuantMatmulTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(CudaQuantMatmulTest, EqualsTheReferenceAtEveryTokenCount) {
  SELFSPEC_REQUIRE_GPU();
  const WeightFormat format = GetParam();
  std::mt19937 rng(82);
  for (const Slice& slice : slices(format)) {
    SCOPED_TRACE(::testing::Message()
                 << slice.rows << " rows, skip " << slice.skip << ", cols " << slice.cols);
    const GgufMatrix m = random_gguf_matrix(rng, format, slice.rows, slice.blocks);
    const DeviceRows rows = upload_rows(m, slice);
    for (const std::int64_t tokens : {1, 2, 5, 8, 9, 17, 64}) {
      const std::vector<float> x = activations(rng, tokens * slice.cols);
      std::vector<float> reference(static_cast<std::size_t>(tokens * slice.rows));
      reference_quant_matmul(rows.host, x.data(), tokens, reference.data());
      EXPECT_TRUE(same_bits(gpu_product(rows, x, tokens), reference)) << tokens << " tokens";
    }
  }
}

// One launch for several matrices of one format (Wq|Wk|Wv: rows 19, 8 and 130, so tiles of
// different matrices share the grid and the last tile of each is short) and the SwiGLU form
// (gate|up): each output the bits of the reference, and the SwiGLU form's the swiglu_value of the
// two references, at several token counts.
TEST_P(CudaQuantMatmulTest, SeveralMatricesAndTheSwigluFormInOneLaunch) {
  SELFSPEC_REQUIRE_GPU();
  const WeightFormat format = GetParam();
  std::mt19937 rng(85);
  const Slice base = slices(format)[1];
  std::vector<GgufMatrix> matrices;
  std::vector<DeviceRows> rows;
  for (const std::int64_t n : {std::int64_t{19}, std::int64_t{8}, std::int64_t{130}}) {
    const Slice slice{n, base.blocks, base.skip, base.cols};
    matrices.push_back(random_gguf_matrix(rng, format, n, base.blocks));
    rows.push_back(upload_rows(matrices.back(), slice));
  }
  const DeviceRows& gate = rows[0];  // 19 rows, and an up matrix of its shape
  const GgufMatrix up_source = random_gguf_matrix(rng, format, 19, base.blocks);
  const DeviceRows up = upload_rows(up_source, {19, base.blocks, base.skip, base.cols});
  for (const std::int64_t tokens : {1, 3, 8, 11}) {
    SCOPED_TRACE(::testing::Message() << tokens << " tokens");
    const std::vector<float> x = activations(rng, tokens * base.cols);
    DeviceBuffer<float> d_x(x);
    DeviceBuffer<std::uint8_t> workspace(quant_activations_bytes(tokens, base.cols));
    quantize_activations(d_x.get(), tokens, base.cols, workspace.get(), nullptr);
    std::vector<DeviceBuffer<float>> ys;
    std::vector<QuantMatmulOutput> outputs;
    for (const DeviceRows& r : rows) {
      ys.emplace_back(static_cast<std::size_t>(tokens * r.view.rows));
      ys.back().poison();
      outputs.push_back({r.view, ys.back().get()});
    }
    quant_matmul(workspace.get(), tokens, outputs, nullptr);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::vector<float> reference(static_cast<std::size_t>(tokens * rows[i].view.rows));
      reference_quant_matmul(rows[i].host, x.data(), tokens, reference.data());
      EXPECT_TRUE(same_bits(ys[i].download(), reference)) << "matrix " << i;
    }
    DeviceBuffer<float> out(static_cast<std::size_t>(tokens * 19));
    out.poison();
    quant_matmul_swiglu(workspace.get(), tokens, gate.view, up.view, out.get(), nullptr);
    std::vector<float> g(static_cast<std::size_t>(tokens * 19));
    std::vector<float> u(g.size());
    reference_quant_matmul(gate.host, x.data(), tokens, g.data());
    reference_quant_matmul(up.host, x.data(), tokens, u.data());
    std::vector<float> expected(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) expected[i] = kernels::swiglu_value(g[i], u[i]);
    EXPECT_TRUE(same_bits(out.download(), expected)) << "SwiGLU form";
  }
  const QuantMatmulOutput too_many[] = {{rows[0].view, nullptr},
                                        {rows[0].view, nullptr},
                                        {rows[0].view, nullptr},
                                        {rows[0].view, nullptr},
                                        {rows[0].view, nullptr}};
  EXPECT_THROW(quant_matmul(nullptr, 1, too_many, nullptr), Error);
  EXPECT_THROW(quant_matmul_swiglu(nullptr, 1, gate.view, rows[1].view, nullptr, nullptr), Error);
}

// The residual add in the epilogue: y + the reference product, one rounding, at several token
// counts (the quantized models' o and down projections).
TEST_P(CudaQuantMatmulTest, AccumulatingAddsTheProductToY) {
  SELFSPEC_REQUIRE_GPU();
  const WeightFormat format = GetParam();
  std::mt19937 rng(87);
  const Slice slice = slices(format)[0];
  const GgufMatrix m = random_gguf_matrix(rng, format, slice.rows, slice.blocks);
  const DeviceRows rows = upload_rows(m, slice);
  for (const std::int64_t tokens : {1, 6, 13}) {
    const std::vector<float> x = activations(rng, tokens * slice.cols);
    const std::vector<float> before = activations(rng, tokens * slice.rows);
    DeviceBuffer<float> d_x(x);
    DeviceBuffer<std::uint8_t> workspace(quant_activations_bytes(tokens, slice.cols));
    DeviceBuffer<float> y(before);
    quantize_activations(d_x.get(), tokens, slice.cols, workspace.get(), nullptr);
    quant_matmul_accumulate(workspace.get(), tokens, rows.view, y.get(), nullptr);
    std::vector<float> expected(before.size());
    reference_quant_matmul(rows.host, x.data(), tokens, expected.data());
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = before[i] + expected[i];
    EXPECT_TRUE(same_bits(y.download(), expected)) << tokens << " tokens";
  }
}

TEST_P(CudaQuantMatmulTest, EmbeddingEqualsTheReferenceDequantization) {
  SELFSPEC_REQUIRE_GPU();
  const WeightFormat format = GetParam();
  std::mt19937 rng(83);
  const Slice slice = slices(format)[1];
  const GgufMatrix m = random_gguf_matrix(rng, format, slice.rows, slice.blocks);
  const DeviceRows rows = upload_rows(m, slice);
  const std::int64_t vocab_begin = 100;
  const std::vector<std::int32_t> tokens = {100, 103, 99,
                                            static_cast<std::int32_t>(100 + slice.rows - 1),
                                            static_cast<std::int32_t>(100 + slice.rows)};
  DeviceBuffer<std::int32_t> d_tokens(tokens);
  DeviceBuffer<float> out(tokens.size() * static_cast<std::size_t>(slice.cols));
  out.poison();
  quant_embedding(rows.view, vocab_begin, d_tokens.get(), static_cast<std::int64_t>(tokens.size()),
                  out.get(), nullptr);
  const std::vector<float> gpu = out.download();
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::int64_t row = tokens[t] - vocab_begin;
    std::vector<float> expected(static_cast<std::size_t>(slice.cols), 0.0f);
    if (row >= 0 && row < slice.rows)
      reference_quant_dequantize_row(rows.host, row, expected.data());
    const std::vector<float> actual(
        gpu.begin() + static_cast<std::ptrdiff_t>(t * slice.cols),
        gpu.begin() + static_cast<std::ptrdiff_t>((t + 1) * slice.cols));
    EXPECT_TRUE(same_bits(actual, expected)) << "token " << tokens[t];
  }
}

TEST_P(CudaQuantMatmulTest, DequantizedRowsAreTheReferenceRoundedToBf16) {
  SELFSPEC_REQUIRE_GPU();
  const WeightFormat format = GetParam();
  std::mt19937 rng(84);
  for (const Slice& slice : slices(format)) {
    SCOPED_TRACE(::testing::Message()
                 << slice.rows << " rows, skip " << slice.skip << ", cols " << slice.cols);
    const GgufMatrix m = random_gguf_matrix(rng, format, slice.rows, slice.blocks);
    const DeviceRows rows = upload_rows(m, slice);
    DeviceBuffer<std::uint16_t> out(static_cast<std::size_t>(slice.rows * slice.cols));
    out.poison();
    quant_dequantize_bf16(rows.view, out.get(), nullptr);
    const std::vector<std::uint16_t> gpu = out.download();
    std::vector<float> row(static_cast<std::size_t>(slice.cols));
    for (std::int64_t r = 0; r < slice.rows; ++r) {
      reference_quant_dequantize_row(rows.host, r, row.data());
      for (std::int64_t c = 0; c < slice.cols; ++c) {
        ASSERT_EQ(gpu[static_cast<std::size_t>(r * slice.cols + c)],
                  f32_to_bf16(row[static_cast<std::size_t>(c)]))
            << "row " << r << " col " << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaQuantMatmulTest, ::testing::ValuesIn(kQuantizedFormats),
                         [](const auto& param_info) {
                           return std::string(weight_format_name(param_info.param));
                         });

// ---- a GGUF model end to end ----

struct GgufModel {
  testing::TempDir dir{"cuda-gguf"};
  std::unique_ptr<GgufFile> file;
  ModelConfig config;
};

void write_gguf(const GgufModel& g, GgmlType type) {
  testing::TinyModelSpec spec;
  spec.hidden = 256;  // whole super-blocks for the K formats
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.layers = 3;
  spec.intermediate = 512;
  spec.vocab = 300;
  spec.scale = 1.5;
  testing::write_tiny_checkpoint(spec, g.dir.path());
  const Checkpoint checkpoint = Checkpoint::open(g.dir.path());
  export_gguf(CheckpointSource(checkpoint), testing::tiny_config(spec), g.dir / "model.gguf", type);
}

// convert_to: empty keeps the GGUF's formats (quantized where a kernel runs them), kBF16 reads
// every matrix as its ggml values rounded to bf16.
std::unique_ptr<LlamaModel> load_gguf_on(Backend& backend, const GgufFile& file,
                                         const ModelConfig& config, Communicator& comm,
                                         std::optional<DType> convert_to = std::nullopt) {
  const GgufTensorSource source(file, config);
  const ShardPlan shard = ShardPlan::make(config, comm.size(), comm.rank());
  return std::make_unique<LlamaModel>(
      config, shard, LlamaWeights::load(source, config, shard, convert_to, backend), comm, backend);
}

class CudaGgufModelTest : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    SELFSPEC_REQUIRE_GPU();
    write_gguf(model_, GetParam());
    model_.file = std::make_unique<GgufFile>(model_.dir / "model.gguf");
    model_.config = model_config_from_gguf(*model_.file);
    gpu_ = make_cuda_backend(0);
    gpu_model_ = load_gguf_on(*gpu_, *model_.file, model_.config, comm_);
    cpu_model_ = load_gguf_on(testing::cpu_backend(), *model_.file, model_.config, comm_);
  }
  GgufModel model_;
  LocalComm comm_;
  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<LlamaModel> gpu_model_;
  std::unique_ptr<LlamaModel> cpu_model_;
  const std::vector<std::int32_t> tokens_ = {1, 17, 4, 88, 23, 5, 61, 9, 42, 77, 13, 30, 2};
};

TEST_P(CudaGgufModelTest, RunsNativelyAndMatchesTheCpuBackend) {
  EXPECT_TRUE(is_quantized(gpu_model_->weights().layers[0].w_gate.format))
      << "the GPU dequantized the GGUF";
  KvCache gpu_kv = gpu_model_->make_kv_cache(64);
  KvCache cpu_kv = cpu_model_->make_kv_cache(64);
  const std::vector<float> gpu = testing::forward_all_rows(*gpu_model_, gpu_kv, tokens_);
  const std::vector<float> cpu = testing::forward_all_rows(*cpu_model_, cpu_kv, tokens_);
  const std::vector<double> reference(cpu.begin(), cpu.end());
  // The quantized GEMV gives the CPU's bits for the same activations (CudaQuantMatmulTest); the
  // rest of the forward (norms, attention) rounds differently, and a difference of one ulp before
  // the int8 activation quantizer can move a value by a whole step (amax / 127): on an H200 the
  // Q8_0 model differed by 6.0e-3, the other formats by less than 1e-3.
  EXPECT_LT(testing::relative_max_error(gpu, reference), 1e-2);
}

TEST_P(CudaGgufModelTest, APrefillPastTheGemvSizesGoesThroughBf16AndStaysClose) {
  // 80 tokens: above kSmallBatch (64), so each quantized matrix is dequantized to bf16 for
  // cuBLASLt (bf16 activations too, as the dense prefill); the decode steps after it run the
  // quantized GEMV again. The reference for that arithmetic is the CPU model of the same file read
  // as bf16 (ggml's values rounded to bf16, activations rounded to bf16 in its matmuls), held to
  // the dense prefill's bound (CudaBackendTest.PrefillThroughCublasLtMatchesTheCpuBackend), which
  // every format met on an H200 (the CPU's int8-activation model had differed by up to 4.9e-2).
  const std::unique_ptr<LlamaModel> cpu_bf16 =
      load_gguf_on(testing::cpu_backend(), *model_.file, model_.config, comm_, DType::kBF16);
  std::vector<std::int32_t> long_prompt;
  for (int i = 0; i < 80; ++i) long_prompt.push_back((i * 37 + 11) % 97);
  KvCache gpu_kv = gpu_model_->make_kv_cache(96);
  KvCache cpu_kv = cpu_bf16->make_kv_cache(96);
  const std::vector<float> gpu = testing::forward_all_rows(*gpu_model_, gpu_kv, long_prompt);
  const std::vector<float> cpu = testing::forward_all_rows(*cpu_bf16, cpu_kv, long_prompt);
  EXPECT_LT(testing::relative_max_error(gpu, std::vector<double>(cpu.begin(), cpu.end())), 3e-2)
      << "bf16 weights and activations in cuBLASLt";
  // The next step: the quantized GEMV (int8 activations) over the cache the bf16 prefill wrote,
  // against the bf16 model's step (bf16 activations) over its own cache. The activations' rounding
  // differs here (int8 steps of amax / 127 against bf16's 2^-9): on an H200 the step differed by
  // up to 3.9e-2 (Q8_0; Q6_K 3.5e-2, Q4_0 and Q4_K below 3e-2); a cache written wrong moves the
  // logits by their own scale.
  const std::vector<std::int32_t> next = {5};
  const std::vector<float> gpu_step = testing::forward_all_rows(*gpu_model_, gpu_kv, next);
  const std::vector<float> cpu_step = testing::forward_all_rows(*cpu_bf16, cpu_kv, next);
  EXPECT_LT(
      testing::relative_max_error(gpu_step, std::vector<double>(cpu_step.begin(), cpu_step.end())),
      6e-2);
}

TEST_P(CudaGgufModelTest, VerificationRowsEqualDecodeStepsAndSpeculationIsLossless) {
  testing::expect_batch_rows_equal_decode_steps(*gpu_model_, std::span(tokens_).first(4),
                                                std::span(tokens_).subspan(4), 64);
  GenerationOptions generation;
  generation.max_new_tokens = 40;
  generation.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {1, 14, 3, 27, 9};
  const std::vector<std::int32_t> expected =
      testing::autoregressive(*gpu_model_, comm_, prompt, generation, 128);
  ControllerOptions controller_options;
  controller_options.kind = "fixed";
  controller_options.max_draft = 4;
  EXPECT_EQ(testing::speculative(*gpu_model_, comm_, prompt, generation,
                                 LayerPlan::skipping(3, std::vector<int>{1}, std::vector<int>{0}),
                                 controller_options, nullptr, nullptr, 128)
                .tokens,
            expected);
}

// The model drafting as itself in fewer bits on the GPU (--draft-weights q4_0 / q8_0): a dense
// model's quantized copy lives on the device in its format (not a second bf16 copy), and the
// draft forwards that read it keep greedy decoding token-identical.
TEST(CudaDraftWeights, AQuantizedCopyDraftsOnTheGpuLosslessly) {
  SELFSPEC_REQUIRE_GPU();
  testing::TempDir dir("cuda-draft-weights");
  testing::TinyModelSpec spec;
  spec.hidden = 128;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.layers = 3;
  spec.intermediate = 256;
  spec.vocab = 300;
  spec.scale = 1.5;
  spec.dtype = DType::kBF16;
  testing::write_tiny_checkpoint(spec, dir.path());
  LocalComm comm;
  const std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  const std::unique_ptr<LlamaModel> model = testing::load_model_on(*gpu, dir.path(), comm);
  GenerationOptions generation;
  generation.max_new_tokens = 40;
  generation.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {1, 14, 3, 27, 9};
  const std::vector<std::int32_t> expected =
      testing::autoregressive(*model, comm, prompt, generation, 128);
  for (const WeightFormat format : {WeightFormat::kQ4_0, WeightFormat::kQ8_0}) {
    SCOPED_TRACE(weight_format_name(format));
    const Checkpoint checkpoint = Checkpoint::open(dir.path());
    model->attach_draft_weights(load_draft_weights(CheckpointSource(checkpoint), model->config(),
                                                   model->shard(), format, *gpu));
    ASSERT_NE(model->draft_weights(), nullptr);
    EXPECT_EQ(model->draft_weights()->layers[0].w_up.format, format);
    ControllerOptions controller_options;
    controller_options.kind = "fixed";
    controller_options.max_draft = 4;
    GenerationOptions g = generation;
    g.draft.draft_weights = true;
    const GenerationResult r = testing::speculative(*model, comm, prompt, g, LayerPlan::full(3),
                                                    controller_options, nullptr, nullptr, 128);
    EXPECT_EQ(r.tokens, expected);
    EXPECT_GT(r.stats.accepted, 0) << "the quantized copy never drafted an accepted token";
  }
}

// The harness's CPU side on every machine: the GGUFs are written, read back quantized, and run.
TEST(CudaGgufModelHarness, TheModelsLoadQuantizedOnTheCpu) {
  for (const GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    GgufModel model;
    write_gguf(model, type);
    model.file = std::make_unique<GgufFile>(model.dir / "model.gguf");
    model.config = model_config_from_gguf(*model.file);
    LocalComm comm;
    const std::unique_ptr<LlamaModel> cpu =
        load_gguf_on(testing::cpu_backend(), *model.file, model.config, comm);
    EXPECT_TRUE(is_quantized(cpu->weights().layers[0].w_gate.format));
    KvCache kv = cpu->make_kv_cache(16);
    const std::vector<std::int32_t> tokens = {1, 5, 7};
    for (const float v : testing::forward_all_rows(*cpu, kv, tokens)) ASSERT_TRUE(std::isfinite(v));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGgufModelTest,
                         ::testing::Values(GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K,
                                           GgmlType::kQ6_K),
                         [](const auto& param_info) {
                           return std::string(
                               ggml_type_name(static_cast<std::uint32_t>(param_info.param)));
                         });

}  // namespace
}  // namespace selfspec::kernels::cuda::test
