// The RoPE form of both GEMVs (kernels/cuda/position_step.hpp): Q|K|V with RoPE and the KV-cache
// write in the epilogue equals, bit for bit, the same GEMV's plain product followed by
// rope_write_kv, in q, the key cache and the value cache:
//  * the CUDA-core GEMV (bf16 weights): matmul_rope_kv against matmul_small_batch on the CUDA
//    cores, and with the norm folded in against matmul_normed on the CUDA cores;
//  * the quantized GEMV: quant_matmul_rope_kv against quant_matmul, in several formats;
// at decode and verification sizes (several token tiles), with f32 and bf16 caches, a token whose
// position is outside the RoPE table (q left unrotated, nothing written) and a slot outside the
// cache (not written). Bad arguments (a head_dim the form cannot pair, Wq not the q rows) throw.
#include "backend/quant_rows_builder.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cuda/quant_rows.hpp"
#include "tests/unit/kernels/quant_test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

constexpr std::int64_t kHeadDim = 128;
constexpr std::int64_t kQHeads = 4;
constexpr std::int64_t kKvHeads = 2;
constexpr std::int64_t kNPast = 30;
constexpr std::int64_t kTablePositions = 120;
constexpr std::int64_t kTokenCounts[] = {1, 2, 3, 9, 16, 17, 40, 64};

// The pass's positions, a RoPE table, the step parameters and two caches (reference and fused) of
// one dtype, the last token's slot outside them.
class PositionFixture {
 public:
  PositionFixture(std::int64_t tokens, DType kv_dtype) : tokens_(tokens), kv_dtype_(kv_dtype) {
    std::vector<std::int32_t> positions(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t) {
      positions[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(kNPast + t);
    }
    if (tokens > 2) positions[1] = static_cast<std::int32_t>(kTablePositions + 7);  // outside
    positions_ = DeviceBuffer<std::int32_t>(positions);
    std::vector<float> inv_freq(static_cast<std::size_t>(kHeadDim / 2));
    for (std::size_t i = 0; i < inv_freq.size(); ++i) {
      inv_freq[i] = static_cast<float>(
          std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(kHeadDim)));
    }
    std::vector<float> table(static_cast<std::size_t>(kTablePositions * kHeadDim));
    cpu::fill_rope_table(inv_freq, 0, kTablePositions, table.data());
    table_ = DeviceBuffer<float>(table);
    step_ =
        DeviceBuffer<StepParams>(std::vector<StepParams>{{static_cast<std::int32_t>(kNPast), 0}});
    capacity_ = kNPast + tokens - 1;
    const auto words = static_cast<std::size_t>(kKvHeads * capacity_ * kHeadDim);
    for (DeviceBuffer<float>* cache : {&k_ref_, &v_ref_, &k_fused_, &v_fused_}) {
      *cache = DeviceBuffer<float>(words);  // f32 words: room for a bf16 cache too
      cache->poison();
    }
  }

  // rope_write_kv on the plain products q, k, v (q rotated in place), into the reference caches.
  void reference_step(float* q, float* k, const float* v) {
    const RopeKvArgs a{.q = q,
                       .q_stride = kQHeads * kHeadDim,
                       .n_q_heads = kQHeads,
                       .k = k,
                       .k_stride = kKvHeads * kHeadDim,
                       .v = v,
                       .kv_heads = kKvHeads,
                       .head_dim = kHeadDim,
                       .capacity = capacity_,
                       .kv_dtype = kv_dtype_};
    rope_write_kv(a, tokens_, positions_.get(), table_.get(), kTablePositions, step_.get(),
                  k_ref_.get(), v_ref_.get(), nullptr);
  }
  // The RoPE form's operands writing q_fused and the fused caches.
  PositionStep fused_step(float* q_fused) const {
    return {.q = q_fused,
            .q_rows = kQHeads * kHeadDim,
            .k_cache = k_fused_.get(),
            .v_cache = v_fused_.get(),
            .capacity = capacity_,
            .kv_dtype = kv_dtype_,
            .head_dim = kHeadDim,
            .positions = positions_.get(),
            .table = table_.get(),
            .table_positions = kTablePositions};
  }
  const StepParams* step_params() const { return step_.get(); }
  void expect_same_caches() const {
    EXPECT_TRUE(same_bits(k_fused_.download(), k_ref_.download())) << "key cache";
    EXPECT_TRUE(same_bits(v_fused_.download(), v_ref_.download())) << "value cache";
  }

 private:
  std::int64_t tokens_;
  DType kv_dtype_;
  std::int64_t capacity_ = 0;
  DeviceBuffer<std::int32_t> positions_;
  DeviceBuffer<float> table_;
  DeviceBuffer<StepParams> step_;
  DeviceBuffer<float> k_ref_, v_ref_, k_fused_, v_fused_;
};

constexpr HeadOutput kOutputs[] = {HeadOutput::kRotated, HeadOutput::kRotatedIntoCache,
                                   HeadOutput::kIntoCache};
constexpr std::int64_t kRows[] = {kQHeads * kHeadDim, kKvHeads* kHeadDim, kKvHeads* kHeadDim};

TEST(CudaRopeForm, TheCudaCoreGemvEqualsItsProductThenRopeWriteKv) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(41);
  for (const std::int64_t cols : {std::int64_t{1001}, std::int64_t{4096}}) {
    std::vector<DeviceWeights> w;
    for (const std::int64_t rows : kRows) {
      w.push_back(upload_weights(random_weights(rng, DType::kBF16, rows, cols)));
    }
    const DeviceBuffer<float> d_g(random_floats(rng, static_cast<std::size_t>(cols), 1));
    for (const bool norm : {false, true}) {
      for (const DType kv_dtype : {DType::kF32, DType::kBF16}) {
        for (const std::int64_t tokens : kTokenCounts) {
          SCOPED_TRACE(::testing::Message() << "cols " << cols << (norm ? " normed" : "") << " "
                                            << dtype_name(kv_dtype) << " cache, T " << tokens);
          PositionFixture f(tokens, kv_dtype);
          const DeviceBuffer<float> d_x(
              random_floats(rng, static_cast<std::size_t>(tokens * cols), 3));
          std::vector<DeviceBuffer<float>> plain;
          std::vector<MatmulOutput> outputs;
          for (std::size_t i = 0; i < 3; ++i) {
            plain.emplace_back(static_cast<std::size_t>(tokens * kRows[i]));
            outputs.push_back({w[i].view, plain.back().get()});
          }
          if (norm) {
            matmul_normed(d_x.get(), d_g.get(), 1e-5F, tokens, outputs, nullptr,
                          GemvKernel::kCudaCores);
          } else {
            matmul_small_batch(d_x.get(), tokens, outputs, nullptr, GemvKernel::kCudaCores);
          }
          f.reference_step(plain[0].get(), plain[1].get(), plain[2].get());

          DeviceBuffer<float> q(static_cast<std::size_t>(tokens * kRows[0]));
          q.poison();
          std::vector<HeadMatmul> heads;
          for (std::size_t i = 0; i < 3; ++i) heads.push_back({w[i].view, kOutputs[i]});
          matmul_rope_kv(d_x.get(), norm ? d_g.get() : nullptr, 1e-5F, tokens, heads,
                         f.fused_step(q.get()), f.step_params(), nullptr);
          EXPECT_TRUE(same_bits(q.download(), plain[0].download())) << "q";
          f.expect_same_caches();
        }
      }
    }
  }
}

TEST(CudaRopeForm, TheQuantizedGemvEqualsItsProductThenRopeWriteKv) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(42);
  const std::int64_t cols = 512;
  for (const WeightFormat format :
       {WeightFormat::kQ4_0, WeightFormat::kQ8_0, WeightFormat::kQ4_K, WeightFormat::kQ6_K}) {
    std::vector<std::vector<std::byte>> host;
    std::vector<DeviceBuffer<std::byte>> device;
    std::vector<QuantWeight> w;
    for (const std::int64_t rows : kRows) {
      const std::int64_t block = quant_rows_layout(format, 1, 32).k_quant ? 256 : 32;
      const cpu::test::GgufMatrix m =
          cpu::test::random_gguf_matrix(rng, format, rows, cols / block);
      host.push_back(build_quant_rows({format, rows, cols, m.data.data(), m.row_bytes, 0}));
      device.emplace_back(host.back());
      w.push_back({format, device.back().get(), rows, cols});
    }
    for (const DType kv_dtype : {DType::kF32, DType::kBF16}) {
      for (const std::int64_t tokens : kTokenCounts) {
        SCOPED_TRACE(::testing::Message() << weight_format_name(format) << " "
                                          << dtype_name(kv_dtype) << " cache, T " << tokens);
        PositionFixture f(tokens, kv_dtype);
        const DeviceBuffer<float> d_x(
            random_floats(rng, static_cast<std::size_t>(tokens * cols), 3));
        DeviceBuffer<std::uint8_t> workspace(quant_activations_bytes(tokens, cols));
        quantize_activations(d_x.get(), tokens, cols, workspace.get(), nullptr);
        std::vector<DeviceBuffer<float>> plain;
        std::vector<QuantMatmulOutput> outputs;
        for (std::size_t i = 0; i < 3; ++i) {
          plain.emplace_back(static_cast<std::size_t>(tokens * kRows[i]));
          outputs.push_back({w[i], plain.back().get()});
        }
        quant_matmul(workspace.get(), tokens, outputs, nullptr);
        f.reference_step(plain[0].get(), plain[1].get(), plain[2].get());

        DeviceBuffer<float> q(static_cast<std::size_t>(tokens * kRows[0]));
        q.poison();
        // Wq|Wk in one launch, Wv in another (as a Q4_K_M file's Q6_K Wv runs).
        const QuantHeadMatmul qk[] = {{w[0], kOutputs[0]}, {w[1], kOutputs[1]}};
        const QuantHeadMatmul v[] = {{w[2], kOutputs[2]}};
        const PositionStep step = f.fused_step(q.get());
        quant_matmul_rope_kv(workspace.get(), tokens, qk, step, f.step_params(), nullptr);
        quant_matmul_rope_kv(workspace.get(), tokens, v, step, f.step_params(), nullptr);
        EXPECT_TRUE(same_bits(q.download(), plain[0].download())) << "q";
        f.expect_same_caches();
      }
    }
  }
}

TEST(CudaRopeForm, ArgumentsTheFormCannotPairThrow) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(43);
  PositionFixture f(1, DType::kF32);
  const DeviceWeights wq = upload_weights(random_weights(rng, DType::kBF16, kRows[0], 64));
  const DeviceBuffer<float> d_x(random_floats(rng, 64, 1));
  DeviceBuffer<float> q(static_cast<std::size_t>(kRows[0]));
  const HeadMatmul heads[] = {{wq.view, HeadOutput::kRotated}};
  PositionStep step = f.fused_step(q.get());
  step.head_dim = 6;  // pairs of a warp would straddle heads
  EXPECT_THROW(matmul_rope_kv(d_x.get(), nullptr, 1e-5F, 1, heads, step, f.step_params(), nullptr),
               Error);
  step = f.fused_step(q.get());
  step.q_rows = kRows[0] / 2;  // Wq is not the q rows
  EXPECT_THROW(matmul_rope_kv(d_x.get(), nullptr, 1e-5F, 1, heads, step, f.step_params(), nullptr),
               Error);
  EXPECT_THROW(
      matmul_rope_kv(d_x.get(), nullptr, 1e-5F, 1, heads, f.fused_step(q.get()), nullptr, nullptr),
      Error);
}

}  // namespace
}  // namespace selfspec::kernels::cuda::test
