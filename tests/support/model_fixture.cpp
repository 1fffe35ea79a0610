#include "tests/support/model_fixture.hpp"

#include "model/exit_head.hpp"
#include "model_io/exit_head_files.hpp"
#include "model_io/model_identity.hpp"
#include "model_io/safetensors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace selfspec::testing {

Backend& cpu_backend() {
  static const std::unique_ptr<Backend> backend = make_cpu_backend();
  return *backend;
}

std::unique_ptr<LlamaModel> load_model(const std::filesystem::path& dir, Communicator& comm,
                                       std::optional<DType> convert_to) {
  return load_model_on(cpu_backend(), dir, comm, convert_to);
}

std::unique_ptr<LlamaModel> load_model_on(Backend& backend, const std::filesystem::path& dir,
                                          Communicator& comm, std::optional<DType> convert_to) {
  const ModelConfig config = ModelConfig::from_file(dir / "config.json");
  const ShardPlan shard = ShardPlan::make(config, comm.size(), comm.rank());
  const Checkpoint checkpoint = Checkpoint::open(dir);
  return std::make_unique<LlamaModel>(
      config, shard, LlamaWeights::load(checkpoint, config, shard, convert_to, backend), comm,
      backend);
}

void forward_rows_into(std::vector<float>& logits, LlamaModel& model, KvCache& kv,
                       std::span<const std::int32_t> tokens, std::span<const std::int32_t> rows,
                       const LayerPlan* plan, const AttentionMask* mask,
                       std::span<const std::int32_t> positions, const ForwardObserver* observer) {
  std::vector<std::int32_t> default_positions(tokens.size());
  std::iota(default_positions.begin(), default_positions.end(),
            static_cast<std::int32_t>(kv.length()));
  ForwardArgs args;
  args.tokens = tokens;
  args.positions = positions.empty() ? std::span<const std::int32_t>(default_positions) : positions;
  args.draft.plan = plan;
  args.mask = mask;
  args.logit_rows = rows;
  args.observer = observer;
  model.forward(args, kv, logits);
}

std::vector<float> forward_rows(LlamaModel& model, KvCache& kv,
                                std::span<const std::int32_t> tokens,
                                std::span<const std::int32_t> rows, const LayerPlan* plan,
                                const AttentionMask* mask, std::span<const std::int32_t> positions,
                                const ForwardObserver* observer) {
  std::vector<float> logits;
  forward_rows_into(logits, model, kv, tokens, rows, plan, mask, positions, observer);
  return logits;
}

std::vector<float> forward_all_rows(LlamaModel& model, KvCache& kv,
                                    std::span<const std::int32_t> tokens, const LayerPlan* plan,
                                    const AttentionMask* mask,
                                    std::span<const std::int32_t> positions) {
  std::vector<std::int32_t> rows(tokens.size());
  std::iota(rows.begin(), rows.end(), 0);
  return forward_rows(model, kv, tokens, rows, plan, mask, positions);
}

void attach_layer_as_exit_head(LlamaModel& model, const std::filesystem::path& dir, int n) {
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const CheckpointSource source(checkpoint);
  const std::string identity = model_identity(source, model.config());
  const auto path = dir / "exit_head.safetensors";
  write_init_layer(source, model.config(), n, identity, path);
  model.attach_exit_head(
      load_exit_head(path, model.config(), identity, model.shard(), std::nullopt, model.backend()));
}

double relative_max_error(std::span<const float> a, std::span<const double> b) {
  double max_error = 0.0;
  double max_ref = 1.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    max_error = std::max(max_error, std::abs(static_cast<double>(a[i]) - b[i]));
    max_ref = std::max(max_ref, std::abs(b[i]));
  }
  if (a.size() != b.size()) return INFINITY;
  return max_error / max_ref;
}

bool bit_identical(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_batch_rows_equal_decode_steps(LlamaModel& model, std::span<const std::int32_t> prefix,
                                          std::span<const std::int32_t> rest,
                                          std::int64_t capacity) {
  KvCache batch_kv = model.make_kv_cache(capacity);
  forward_all_rows(model, batch_kv, prefix);
  const std::vector<float> batch = forward_all_rows(model, batch_kv, rest);
  KvCache single_kv = model.make_kv_cache(capacity);
  forward_all_rows(model, single_kv, prefix);
  const auto vocab = static_cast<std::size_t>(model.vocab_local());
  for (std::size_t t = 0; t < rest.size(); ++t) {
    const std::vector<float> single = forward_all_rows(model, single_kv, rest.subspan(t, 1));
    EXPECT_TRUE(bit_identical(single, std::span(batch).subspan(t * vocab, vocab))) << "token " << t;
  }
}

void expect_kv_equals_fresh_run(LlamaModel& model, const KvCache& kv,
                                std::span<const std::int32_t> sequence) {
  ASSERT_GE(sequence.size(), static_cast<std::size_t>(kv.length()));
  KvCache fresh = model.make_kv_cache(kv.capacity());
  forward_all_rows(model, fresh, sequence.first(static_cast<std::size_t>(kv.length())));
  ASSERT_EQ(kv.dtype(), fresh.dtype());
  const auto row = static_cast<std::size_t>(kv.head_dim()) * kv.element_bytes();
  for (std::int64_t l = 0; l < kv.num_layers(); ++l) {
    for (std::int64_t h = 0; h < kv.kv_heads(); ++h) {
      const auto offset = static_cast<std::size_t>(h * kv.capacity()) * row;
      const auto bytes = static_cast<std::size_t>(kv.length()) * row;
      for (const bool values : {false, true}) {
        const auto* a = static_cast<const std::byte*>(values ? kv.values(l) : kv.keys(l));
        const auto* b = static_cast<const std::byte*>(values ? fresh.values(l) : fresh.keys(l));
        EXPECT_EQ(std::memcmp(a + offset, b + offset, bytes), 0) << l << (values ? " V" : " K");
      }
    }
  }
}

}  // namespace selfspec::testing
