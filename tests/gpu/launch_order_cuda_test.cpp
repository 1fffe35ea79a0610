// Programmatic dependent launch (kernels/cuda/cuda_common.cuh): a chain of dependent kernels - each
// reading what the one before wrote, and overwriting what an earlier one read - run on a created
// stream (where launches are programmatic dependents when the device supports it) gives the same
// bits as the same chain on the legacy default stream (plain launches, full serialisation). A
// kernel that read its input before waiting, or wrote before its predecessor finished reading,
// would break the chain's bits. The same for the tensor-core GEMV's fused forms, whose residual
// adds read and write the chain's x.
#include "cuda_test_util.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cuda/cuda_stream.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

// A LLaMA-like block chain over small matrices, `rounds` times: norm, fused q|k|v GEMV, RoPE and
// KV write, attention, o GEMV, add + norm, fused gate|up GEMV, SwiGLU, down GEMV. `fused`: the
// tensor-core GEMV's fused forms instead (q|k|v and gate|up+SwiGLU with the norm folded in, o and
// down adding into x), whose residual adds read and write the stream's x.
std::vector<float> run_chain(cudaStream_t stream, int rounds, bool fused = false) {
  constexpr std::int64_t kHidden = 256;
  constexpr std::int64_t kHeads = 4;
  constexpr std::int64_t kHeadDim = 64;
  constexpr std::int64_t kInter = 512;
  constexpr std::int64_t kCapacity = 64;
  std::mt19937 rng(61);
  const StoredWeights wq = random_weights(rng, DType::kBF16, kHidden, kHidden);
  const StoredWeights wk = random_weights(rng, DType::kBF16, kHidden, kHidden);
  const StoredWeights wv = random_weights(rng, DType::kBF16, kHidden, kHidden);
  const StoredWeights wo = random_weights(rng, DType::kBF16, kHidden, kHidden);
  const StoredWeights wg = random_weights(rng, DType::kBF16, kInter, kHidden);
  const StoredWeights wu = random_weights(rng, DType::kBF16, kInter, kHidden);
  const StoredWeights wd = random_weights(rng, DType::kBF16, kHidden, kInter);
  const DeviceWeights d_wq = upload_weights(wq), d_wk = upload_weights(wk),
                      d_wv = upload_weights(wv), d_wo = upload_weights(wo),
                      d_wg = upload_weights(wg), d_wu = upload_weights(wu),
                      d_wd = upload_weights(wd);
  DeviceBuffer<float> x(random_floats(rng, kHidden, 1));
  DeviceBuffer<float> norm_w(random_floats(rng, kHidden, 1));
  DeviceBuffer<float> h(kHidden), q(kHidden), k(kHidden), v(kHidden), attn(kHidden), o(kHidden);
  DeviceBuffer<float> gate(kInter), up(kInter);
  DeviceBuffer<float> k_cache(kHeads * kCapacity * kHeadDim),
      v_cache(kHeads * kCapacity * kHeadDim);
  k_cache.zero();
  v_cache.zero();
  std::vector<float> inv_freq(kHeadDim / 2);
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] = 1.0f / std::pow(10000.0f, 2.0f * static_cast<float>(i) / kHeadDim);
  }
  // The RoPE table for every position of the chain (round r is at position r).
  const std::int64_t table_positions = rounds;
  std::vector<float> table(static_cast<std::size_t>(table_positions * kHeadDim));
  cpu::fill_rope_table(inv_freq, 0, table_positions, table.data());
  const DeviceBuffer<float> d_table(table);
  const AttentionDims dims{1, kHeads, kHeads, kHeadDim, kCapacity};
  DeviceBuffer<std::uint8_t> workspace(attention_workspace_bytes(dims));
  workspace.zero();
  std::vector<float> out;
  for (int r = 0; r < rounds; ++r) {
    DeviceBuffer<std::int32_t> position(std::vector<std::int32_t>{r});
    DeviceBuffer<StepParams> step(std::vector<StepParams>{{r, 0}});
    const std::vector<MatmulOutput> qkv = {
        {d_wq.view, q.get()}, {d_wk.view, k.get()}, {d_wv.view, v.get()}};
    if (fused) {
      matmul_normed(x.get(), norm_w.get(), 1e-5f, 1, qkv, stream);
    } else {
      rmsnorm(x.get(), norm_w.get(), 1e-5f, 1, kHidden, h.get(), stream);
      matmul_small_batch(h.get(), 1, qkv, stream);
    }
    RopeKvArgs args;
    args.q = q.get();
    args.q_stride = kHidden;
    args.n_q_heads = kHeads;
    args.k = k.get();
    args.k_stride = kHidden;
    args.v = v.get();
    args.kv_heads = kHeads;
    args.head_dim = kHeadDim;
    args.capacity = kCapacity;
    rope_write_kv(args, 1, position.get(), d_table.get(), table_positions, step.get(),
                  k_cache.get(), v_cache.get(), stream);
    attention(q.get(), k_cache.get(), v_cache.get(), dims, step.get(), nullptr, 0.125f, attn.get(),
              workspace.get(), stream);
    if (fused) {
      matmul_accumulate(attn.get(), 1, d_wo.view, x.get(), stream);
      matmul_normed_swiglu(x.get(), norm_w.get(), 1e-5f, 1, d_wg.view, d_wu.view, gate.get(),
                           stream);
      matmul_accumulate(gate.get(), 1, d_wd.view, x.get(), stream);
    } else {
      matmul_small_batch(attn.get(), 1, d_wo.view, o.get(), stream);
      add_rmsnorm(x.get(), o.get(), norm_w.get(), 1e-5f, 1, kHidden, h.get(), stream);
      const std::vector<MatmulOutput> gate_up = {{d_wg.view, gate.get()}, {d_wu.view, up.get()}};
      matmul_small_batch(h.get(), 1, gate_up, stream);
      swiglu(gate.get(), up.get(), gate.get(), kInter, stream);
      matmul_small_batch(gate.get(), 1, d_wd.view, o.get(), stream);
      add_inplace(x.get(), o.get(), kHidden, stream);
    }
    SELFSPEC_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return x.download();
}

TEST(CudaLaunchOrder, DependentLaunchesGiveThePlainLaunchesBits) {
  SELFSPEC_REQUIRE_GPU();
  const CudaStream stream;
  const std::vector<float> plain = run_chain(nullptr, 24);
  const std::vector<float> dependent = run_chain(stream.get(), 24);
  EXPECT_TRUE(same_bits(dependent, plain));
}

TEST(CudaLaunchOrder, DependentFusedFormsGiveThePlainLaunchesBits) {
  SELFSPEC_REQUIRE_GPU();
  if (!tensor_core_gemv_supported()) GTEST_SKIP() << "no tensor-core GEMV on this device";
  const CudaStream stream;
  const std::vector<float> plain = run_chain(nullptr, 24, true);
  const std::vector<float> dependent = run_chain(stream.get(), 24, true);
  EXPECT_TRUE(same_bits(dependent, plain));
}

}  // namespace
}  // namespace selfspec::kernels::cuda::test
