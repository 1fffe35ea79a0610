// The feature-level draft head (model/feature_head.hpp, EAGLE §3) in LlamaModel::forward:
//  * a feature forward over the target's own final residual rows equals the double-precision
//    reference (u = fc · [n(h); E(x)] + b, then the head's layer as a one-layer model over u, the
//    final norm and the LM head) for MHA, GQA with Qwen2's biases and tied embeddings, at TP 1 and
//    TP 2 under both reduction orders;
//  * its rows are token-count invariant (all at once = one at a time, bit for bit), and it leaves
//    the KV cache's length alone while writing the head's layer at the given slots;
//  * "final_residual" is the final norm's input in a target forward;
//  * the loader refuses a file of another format or version, for another model, with a tensor
//    missing or of the wrong shape, and the model refuses two draft heads and a feature forward
//    that does not fit.
#include "model/feature_head.hpp"
#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "model_io/model_identity.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/tensor_source.hpp"
#include "tests/support/feature_head_file.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/thread_comm.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "tests/support/tiny_models.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace selfspec::testing {
namespace {

using Rows = std::vector<std::vector<double>>;

const std::vector<std::int32_t> kTokens = {1, 14, 3, 27, 9, 20, 5};

double rms_scale(const std::vector<double>& x, double eps) {
  double sum = 0.0;
  for (double v : x) sum += v * v;
  return 1.0 / std::sqrt(sum / static_cast<double>(x.size()) + eps);
}

// The reference's logits [T-1][V] of the head over the target's rows `h` (as the engine gives
// them) and the tokens after them.
Rows reference_head_logits(const ReferenceWeights& ref, const FeatureHeadValues& head,
                           std::span<const float> h) {
  const ModelConfig& c = ref.config;
  const auto H = static_cast<std::size_t>(c.hidden_size);
  Rows u;
  for (std::size_t j = 0; j + 1 < kTokens.size(); ++j) {
    std::vector<double> in(2 * H);
    std::vector<double> row(h.begin() + static_cast<std::ptrdiff_t>(j * H),
                            h.begin() + static_cast<std::ptrdiff_t>((j + 1) * H));
    const double scale = rms_scale(row, c.rms_norm_eps);
    const auto token = static_cast<std::size_t>(kTokens[j + 1]);
    for (std::size_t i = 0; i < H; ++i) {
      in[i] = row[i] * scale * ref.final_norm[i];
      in[H + i] = ref.embedding[token * H + i];
    }
    std::vector<double> out(H);
    for (std::size_t r = 0; r < H; ++r) {
      double sum = head.bias[r];
      for (std::size_t k = 0; k < 2 * H; ++k) sum += head.fc[r * 2 * H + k] * in[k];
      out[r] = sum;
    }
    u.push_back(std::move(out));
  }
  ReferenceWeights one = ref;
  one.config.num_layers = 1;
  one.layers = {ref.layers.back()};
  return reference_forward_rows(one, std::move(u));
}

void expect_equals_reference(LlamaModel& model, const ReferenceWeights& ref,
                             const FeatureHeadValues& head, const std::string& label) {
  const std::vector<float> h = final_residual_rows(model, kTokens);
  KvCache kv = model.make_kv_cache(32);
  const std::span<const std::int32_t> next = std::span(kTokens).subspan(1);
  const auto rows = static_cast<std::int64_t>(next.size());
  const std::vector<float> logits = feature_forward_logits(
      model, kv, std::span(h).first(static_cast<std::size_t>(rows * model.config().hidden_size)),
      next, 0);
  EXPECT_EQ(kv.length(), 0) << label << ": a feature forward leaves the cache's length alone";
  const Rows expected = reference_head_logits(ref, head, h);
  const IndexRange vocab = model.shard().vocab;
  const auto width = static_cast<std::size_t>(vocab.size());
  for (std::size_t t = 0; t < expected.size(); ++t) {
    const std::vector<double> shard(expected[t].begin() + vocab.begin,
                                    expected[t].begin() + vocab.end);
    EXPECT_LT(relative_max_error(std::span(logits).subspan(t * width, width), shard), 2e-5)
        << label << " row " << t;
  }
}

TEST(FeatureHead, TheForwardEqualsTheReference) {
  TinyModelSpec gqa = gqa_tiny_spec(3);
  TinyModelSpec qwen2 = gqa;
  qwen2.model_type = "qwen2";
  qwen2.attention_bias = true;
  TinyModelSpec tied;
  tied.tie = true;
  for (const auto& [name, spec] : std::vector<std::pair<std::string, TinyModelSpec>>{
           {"mha", TinyModelSpec{}}, {"qwen2 gqa bias", qwen2}, {"tied", tied}}) {
    TempDir dir;
    LocalComm comm;
    const ReferenceWeights ref = write_tiny_checkpoint(spec, dir.path());
    std::unique_ptr<LlamaModel> model = load_model(dir.path(), comm);
    const FeatureHeadValues head = attach_feature_head(*model, dir.path(), 3);
    expect_equals_reference(*model, ref, head, name);
    model->set_reduction_order(ReductionOrder::kTpInvariant);
    expect_equals_reference(*model, ref, head, name + " tp-invariant");
  }
}

TEST(FeatureHead, TheForwardEqualsTheReferenceAtTp2) {
  TempDir dir;
  const ReferenceWeights ref = write_tiny_checkpoint(tensor_parallel_tiny_spec(2), dir.path());
  run_model_ranks_in_both_orders(2, dir.path(), [&](LlamaModel& model, ThreadComm& comm) {
    FeatureHeadFile options;
    options.seed = 5;
    const auto path = dir.path() / ("feature_head." + std::to_string(comm.rank()) + ".safetensors");
    const FeatureHeadValues head = write_feature_head(dir.path(), model.config(), path, options);
    const Checkpoint checkpoint = Checkpoint::open(dir.path());
    model.attach_feature_head(load_feature_head(
        path, model.config(), model_identity(CheckpointSource(checkpoint), model.config()),
        model.shard(), std::nullopt, model.backend()));
    expect_equals_reference(model, ref, head, "tp 2");
  });
}

TEST(FeatureHead, RowsAreTokenCountInvariantAndWriteTheHeadsLayerAtTheirSlots) {
  TempDir dir;
  LocalComm comm;
  write_tiny_checkpoint(gqa_tiny_spec(3), dir.path());
  std::unique_ptr<LlamaModel> model = load_model(dir.path(), comm);
  attach_feature_head(*model, dir.path());
  const std::int64_t hidden = model->config().hidden_size;
  const std::vector<float> h = final_residual_rows(*model, kTokens);
  const std::span<const std::int32_t> next = std::span(kTokens).subspan(1);
  const auto rows = next.size();
  const std::span<const float> features =
      std::span(h).first(rows * static_cast<std::size_t>(hidden));
  const auto vocab = static_cast<std::size_t>(model->vocab_local());
  KvCache all = model->make_kv_cache(32);
  const std::vector<float> together = feature_forward_logits(*model, all, features, next, 0);
  KvCache one = model->make_kv_cache(32);
  for (std::size_t t = 0; t < rows; ++t) {
    const std::vector<float> alone = feature_forward_logits(
        *model, one,
        features.subspan(t * static_cast<std::size_t>(hidden), static_cast<std::size_t>(hidden)),
        next.subspan(t, 1), static_cast<std::int64_t>(t));
    EXPECT_TRUE(bit_identical(alone, std::span(together).subspan(t * vocab, vocab))) << "row " << t;
  }
  // The head's layer (index L) holds the same K/V either way; the model's layers hold nothing.
  const auto layer = model->config().num_layers;
  const std::size_t floats = rows * static_cast<std::size_t>(model->config().head_dim);
  for (std::int64_t head = 0; head < all.kv_heads(); ++head) {
    const std::size_t offset =
        static_cast<std::size_t>(head * all.head_stride() * model->config().head_dim);
    EXPECT_TRUE(bit_identical({all.f32_keys(layer) + offset, floats},
                              {one.f32_keys(layer) + offset, floats}));
    EXPECT_TRUE(bit_identical({all.f32_values(layer) + offset, floats},
                              {one.f32_values(layer) + offset, floats}));
  }
}

TEST(FeatureHead, FinalResidualIsTheFinalNormsInput) {
  TempDir dir;
  LocalComm comm;
  write_tiny_checkpoint(gqa_tiny_spec(2), dir.path());
  std::unique_ptr<LlamaModel> model = load_model(dir.path(), comm);
  std::vector<float> residual, last_layer;
  const ForwardObserver keep = [&](std::string_view name, int, std::span<const float> data,
                                   std::int64_t) {
    if (name == "final_residual") residual.assign(data.begin(), data.end());
    if (name == "mlp_out") last_layer.assign(data.begin(), data.end());  // the last one stays
  };
  KvCache kv = model->make_kv_cache(32);
  const std::int32_t row = 0;
  forward_rows(*model, kv, kTokens, std::span(&row, 1), nullptr, nullptr, {}, &keep);
  EXPECT_EQ(residual.size(),
            kTokens.size() * static_cast<std::size_t>(model->config().hidden_size));
  EXPECT_TRUE(bit_identical(residual, last_layer));
}

class FeatureHeadFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    write_tiny_checkpoint(gqa_tiny_spec(2), dir_.path());
    model_ = load_model(dir_.path(), comm_);
    const Checkpoint checkpoint = Checkpoint::open(dir_.path());
    identity_ = model_identity(CheckpointSource(checkpoint), model_->config());
  }
  // The loader's error for a head written with `options`.
  std::string load_error(const FeatureHeadFile& options) {
    const auto path = dir_.path() / "head.safetensors";
    write_feature_head(dir_.path(), model_->config(), path, options);
    try {
      load_feature_head(path, model_->config(), identity_, model_->shard(), std::nullopt,
                        model_->backend());
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }
  TempDir dir_;
  LocalComm comm_;
  std::unique_ptr<LlamaModel> model_;
  std::string identity_;
};

TEST_F(FeatureHeadFiles, MalformedOrForeignHeadsAreRefusedNamingTheField) {
  using ::testing::HasSubstr;
  EXPECT_EQ(load_error({}), "");
  FeatureHeadFile exit_head;
  exit_head.metadata["format"] = "selfspec-exit-head";
  EXPECT_THAT(load_error(exit_head), HasSubstr("metadata format is 'selfspec-exit-head'"));
  FeatureHeadFile version;
  version.metadata["version"] = "2";
  EXPECT_THAT(load_error(version), HasSubstr("format version '2'"));
  FeatureHeadFile other;
  other.metadata["model_identity"] = "0123";
  EXPECT_THAT(load_error(other), HasSubstr("made for another model"));
  FeatureHeadFile layers;
  layers.metadata["num_layers"] = "7";
  EXPECT_THAT(load_error(layers), HasSubstr("hidden_size 64 and 7 layers"));
  FeatureHeadFile missing;
  missing.omit = "feature_head.layer.mlp.down_proj.weight";
  EXPECT_THAT(load_error(missing),
              HasSubstr("tensor 'feature_head.layer.mlp.down_proj.weight' is missing"));
  FeatureHeadFile narrow;
  narrow.fc_cols = 40;
  EXPECT_THAT(load_error(narrow),
              HasSubstr("'feature_head.fc.weight' has shape [64, 40], expected [64, 128]"));
}

TEST_F(FeatureHeadFiles, OneDraftHeadPerModelAndForwardsThatFit) {
  attach_layer_as_exit_head(*model_, dir_.path(), 1);
  EXPECT_THROW(attach_feature_head(*model_, dir_.path()), Error);
  model_ = load_model(dir_.path(), comm_);
  const std::int64_t hidden = model_->config().hidden_size;
  std::vector<float> features(static_cast<std::size_t>(2 * hidden), 0.5F);
  const std::vector<std::int32_t> tokens = {3, 4};
  KvCache plain = model_->make_kv_cache(8);
  EXPECT_THROW(feature_forward_logits(*model_, plain, features, tokens, 0), Error);  // no head
  attach_feature_head(*model_, dir_.path());
  EXPECT_THROW(attach_layer_as_exit_head(*model_, dir_.path(), 1), Error);
  KvCache kv = model_->make_kv_cache(8);
  EXPECT_NO_THROW(feature_forward_logits(*model_, kv, features, tokens, 6));
  EXPECT_THROW(feature_forward_logits(*model_, kv, features, tokens, 7), Error);  // past the cache
  EXPECT_THROW(
      feature_forward_logits(
          *model_, kv, std::span(features).first(static_cast<std::size_t>(hidden)), tokens, 0),
      Error);  // one row of features for two tokens
  EXPECT_THROW(feature_forward_logits(*model_, plain, features, tokens, 0),
               Error);  // no head layer
}

}  // namespace
}  // namespace selfspec::testing
