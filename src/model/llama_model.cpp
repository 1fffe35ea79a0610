#include "model/llama_model.hpp"

#include "core/error.hpp"
#include "kernels/cpu/rope.hpp"
#include "model/rope_frequencies.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>

namespace selfspec {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

LlamaModel::LlamaModel(ModelConfig config, ShardPlan shard, LlamaWeights weights,
                       Communicator& comm, Backend& backend)
    : config_(std::move(config)),
      shard_(std::move(shard)),
      weights_(std::move(weights)),
      comm_(comm),
      backend_(backend),
      full_plan_(LayerPlan::full(static_cast<int>(config_.num_layers))),
      q_local_(shard_.q_heads.size()),
      kv_local_(shard_.kv_heads.size()),
      inter_local_(shard_.intermediate.size()) {
  SELFSPEC_CHECK(comm_.size() == shard_.tp && comm_.rank() == shard_.rank,
                 "shard plan for rank {}/{} used on communicator rank {}/{}", shard_.rank,
                 shard_.tp, comm_.rank(), comm_.size());
  inv_freq_ = rope_inverse_frequencies(config_);
}

void LlamaModel::ensure_rope_positions(std::span<const std::int32_t> positions) {
  std::int64_t needed = 0;
  for (const std::int32_t p : positions) {
    SELFSPEC_CHECK(p >= 0, "position {} is negative", p);
    needed = std::max<std::int64_t>(needed, std::int64_t{p} + 1);
  }
  if (needed <= rope_positions_) return;
  // Whole powers of two from 1024: a long run grows the table a few times, each an allocation
  // (which a graph-recording backend notices) outside any forward.
  std::int64_t rows = std::max<std::int64_t>(1024, rope_positions_);
  while (rows < needed) rows *= 2;
  const auto floats = static_cast<std::size_t>(rows * config_.head_dim);
  std::vector<float> table(floats);
  kernels::cpu::fill_rope_table(inv_freq_, 0, rows, table.data());
  rope_table_ = backend_.allocate(floats * sizeof(float));
  backend_.upload(rope_table_.data(), table.data(), floats * sizeof(float));
  rope_positions_ = rows;
}

KvCache LlamaModel::make_kv_cache(std::int64_t capacity) const {
  return KvCache(backend_, config_.num_layers + (exit_head_ || feature_head_ ? 1 : 0), kv_local_,
                 config_.head_dim, capacity, kv_dtype_);
}

void LlamaModel::set_kv_dtype(DType dtype) {
  SELFSPEC_CHECK(dtype == DType::kF32 || dtype == DType::kBF16,
                 "--kv-dtype {}: the KV cache holds f32 or bf16", dtype_name(dtype));
  kv_dtype_ = dtype;
}

void LlamaModel::attach_exit_head(ExitHead head) {
  SELFSPEC_CHECK(head.exit_layer >= 1 && head.exit_layer < config_.num_layers,
                 "exit head {}: exit layer {} is outside [1, {}]", head.path.string(),
                 head.exit_layer, config_.num_layers - 1);
  SELFSPEC_CHECK(!feature_head_,
                 "exit head {}: a feature head is attached already (one draft "
                 "head per model)",
                 head.path.string());
  exit_head_ = std::move(head);
  if (fixed_partition_) cut_all_layers();
}

void LlamaModel::attach_feature_head(FeatureHead head) {
  SELFSPEC_CHECK(!exit_head_,
                 "feature head {}: an exit head is attached already (one draft "
                 "head per model)",
                 head.path.string());
  SELFSPEC_CHECK(
      head.fc_feature.rows == config_.hidden_size && head.fc_feature.cols == config_.hidden_size &&
          head.fc_embedding.rows == config_.hidden_size &&
          head.fc_embedding.cols == config_.hidden_size && head.fc_bias.size == config_.hidden_size,
      "feature head {}: fc does not map 2 x {} to {} values", head.path.string(),
      config_.hidden_size, config_.hidden_size);
  feature_head_ = std::move(head);
  if (fixed_partition_) cut_all_layers();
}

void LlamaModel::attach_draft_weights(DraftWeights draft) {
  SELFSPEC_CHECK(draft.layers.size() == static_cast<std::size_t>(config_.num_layers),
                 "draft weights hold {} layers but the model has {}", draft.layers.size(),
                 config_.num_layers);
  SELFSPEC_CHECK(draft.output.rows == weights_.output_matrix().rows &&
                     draft.output.cols == weights_.output_matrix().cols,
                 "draft weights: the output projection is {} x {}, the model's {} x {}",
                 draft.output.rows, draft.output.cols, weights_.output_matrix().rows,
                 weights_.output_matrix().cols);
  draft_ = std::move(draft);
  if (fixed_partition_) cut_all_layers();
}

void LlamaModel::cut_all_layers() {
  layer_chunks_.clear();
  draft_chunks_.clear();
  for (const LayerWeights& w : weights_.layers) layer_chunks_.push_back(cut_layer(w));
  if (exit_head_) layer_chunks_.push_back(cut_layer(exit_head_->weights));
  if (feature_head_) layer_chunks_.push_back(cut_layer(feature_head_->layer));
  if (draft_) {
    for (const LayerWeights& w : draft_->layers) draft_chunks_.push_back(cut_layer(w));
  }
}

LlamaModel::LayerChunks LlamaModel::cut_layer(const LayerWeights& w) const {
  const std::int64_t unit = shard_.intermediate_unit;
  return {fixed_partition_->cut(w.wo, config_.num_heads, shard_.q_heads, config_.head_dim),
          fixed_partition_->cut(w.w_down, config_.intermediate_size / unit,
                                {shard_.intermediate.begin / unit, shard_.intermediate.end / unit},
                                unit)};
}

const LlamaModel::LayerChunks* LlamaModel::layer_chunks(int layer, bool draft) const {
  if (!fixed_partition_) return nullptr;
  const auto index = static_cast<std::size_t>(layer);
  const std::vector<LayerChunks>& chunks = draft ? draft_chunks_ : layer_chunks_;
  SELFSPEC_CHECK(index < chunks.size(), "fixed-partition reduction: {}layer {} has no chunks",
                 draft ? "draft " : "", layer);
  return &chunks[index];
}

void LlamaModel::set_reduction_order(ReductionOrder order) {
  layer_chunks_.clear();
  draft_chunks_.clear();
  fixed_partition_.reset();
  if (order == ReductionOrder::kRankOrder) return;
  fixed_partition_ = std::make_unique<FixedPartitionProjection>(
      backend_, comm_, static_cast<int>(tp_invariant_chunks(config_)));
  cut_all_layers();
}

bool LlamaModel::observes(const Observe& observe, std::string_view name) const {
  if (!observe) return false;
  return observe_only_.empty() ||
         std::find(observe_only_.begin(), observe_only_.end(), name) != observe_only_.end();
}

float* LlamaModel::workspace(DeviceBuffer& buffer, std::size_t floats) {
  if (buffer.bytes() < floats * sizeof(float)) buffer = backend_.allocate(floats * sizeof(float));
  return buffer.as<float>();
}

void LlamaModel::all_reduce(float* data, std::int64_t count) {
  if (comm_.size() == 1) return;
  const auto start = Clock::now();
  backend_.all_reduce(comm_, data, count);
  counters_.comm_seconds += seconds_since(start);
  ++counters_.all_reduces;
}

void LlamaModel::row_parallel(const float* x, std::int64_t n_tokens, const Matrix& w,
                              const FixedPartitionProjection::Weight* chunks, float* out) {
  if (chunks == nullptr) {
    backend_.matmul(x, n_tokens, w.view(), out);
    all_reduce(out, n_tokens * config_.hidden_size);
    return;
  }
  const auto start = Clock::now();
  fixed_partition_->project(x, n_tokens, *chunks, out);
  if (comm_.size() > 1) {
    counters_.comm_seconds += seconds_since(start);
    ++counters_.all_reduces;
  }
}

void LlamaModel::norm(const Vector& weight, std::int64_t n_tokens) {
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  if (pending_ != nullptr) {
    backend_.add_rmsnorm(x_.as<float>(), pending_, weight.ptr(), eps, n_tokens, config_.hidden_size,
                         h_.as<float>());
    pending_ = nullptr;
  } else {
    backend_.rmsnorm(x_.as<float>(), weight.ptr(), eps, n_tokens, config_.hidden_size,
                     h_.as<float>());
  }
}

void LlamaModel::flush_residual(std::int64_t n_tokens) {
  if (pending_ == nullptr) return;
  backend_.add_inplace(x_.as<float>(), pending_, n_tokens * config_.hidden_size);
  pending_ = nullptr;
}

LogitRows LlamaModel::forward(const ForwardArgs& args, KvCache& kv, std::vector<float>& logits) {
  const auto start = Clock::now();
  const std::int64_t n_tokens = static_cast<std::int64_t>(args.tokens.size());
  const std::int64_t hidden = config_.hidden_size;
  const LayerPlan& plan = args.draft.plan != nullptr ? *args.draft.plan : full_plan_;
  SELFSPEC_CHECK(n_tokens > 0, "forward needs at least one token");
  SELFSPEC_CHECK(args.positions.size() == args.tokens.size(), "forward: {} tokens but {} positions",
                 args.tokens.size(), args.positions.size());
  SELFSPEC_CHECK(plan.num_layers() == config_.num_layers,
                 "layer plan covers {} layers but the model has {}", plan.num_layers(),
                 config_.num_layers);
  SELFSPEC_CHECK(
      args.mask == nullptr || args.mask->is_causal() || args.mask->n_tokens() == n_tokens,
      "tree mask is for {} tokens but the forward has {}", args.mask->n_tokens(), n_tokens);
  const bool head_layer = exit_head_ || feature_head_;
  SELFSPEC_CHECK(kv.num_layers() == config_.num_layers ||
                     (head_layer && kv.num_layers() == config_.num_layers + 1),
                 "forward: the KV cache has {} layers, the model {}{}", kv.num_layers(),
                 config_.num_layers, head_layer ? " (+ 1 for its draft head)" : "");
  SELFSPEC_CHECK(
      !args.draft.early_exit || (exit_head_ && kv.num_layers() == config_.num_layers + 1),
      "an early-exit forward needs an exit head and a KV cache made with its layer");
  SELFSPEC_CHECK(!args.draft.draft_weights || draft_,
                 "a forward on the draft weights needs them attached (--draft-weights)");
  const bool segmented = !args.segments.empty();
  if (args.draft.features != nullptr) {
    check_feature_forward(args, kv);
  } else {
    SELFSPEC_CHECK(segmented || kv.length() + n_tokens <= kv.capacity(),
                   "KV cache full: {} cached + {} new tokens exceed its capacity of {}",
                   kv.length(), n_tokens, kv.capacity());
  }
  SELFSPEC_CHECK(!segmented || args.mask == nullptr || args.mask->is_causal(),
                 "a forward over several sequences is causal: it takes no tree mask");
  for (const KvSegment& segment : args.segments) {
    SELFSPEC_CHECK(
        segment.kv_offset + segment.n_past + segment.n_tokens <= kv.capacity(),
        "sequence at KV offset {}: {} cached + {} new tokens exceed the cache's {} slots",
        segment.kv_offset, segment.n_past, segment.n_tokens, kv.capacity());
  }
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    const std::int32_t token = args.tokens[static_cast<std::size_t>(t)];
    SELFSPEC_CHECK(token >= 0 && token < config_.vocab_size,
                   "token id {} is outside the vocabulary [0, {})", token, config_.vocab_size);
    SELFSPEC_CHECK(args.positions[static_cast<std::size_t>(t)] >= 0, "negative position {}",
                   args.positions[static_cast<std::size_t>(t)]);
  }
  for (std::int32_t row : args.logit_rows) {
    SELFSPEC_CHECK(row >= 0 && row < n_tokens, "logit row {} is outside [0, {})", row, n_tokens);
  }
  const DraftVocabulary* vocabulary = args.draft.vocabulary;
  SELFSPEC_CHECK(
      vocabulary == nullptr || vocabulary->source() == weights_.output_matrix().data.data(),
      "forward: the draft vocabulary was built for another model");

  // Workspaces first: nothing is allocated inside the launches (a recording backend records them).
  const auto tokens_n = static_cast<std::size_t>(n_tokens);
  workspace(x_, tokens_n * hidden);
  workspace(h_, tokens_n * hidden);
  workspace(o_, tokens_n * hidden);
  workspace(q_, tokens_n * q_local_ * config_.head_dim);
  workspace(attn_, tokens_n * q_local_ * config_.head_dim);
  workspace(k_, tokens_n * kv_local_ * config_.head_dim);
  workspace(v_, tokens_n * kv_local_ * config_.head_dim);
  workspace(gate_, tokens_n * inter_local_);
  workspace(up_, tokens_n * inter_local_);
  const FeatureRows* features = args.draft.features;
  if (features != nullptr) {
    backend_.upload(workspace(features_, tokens_n * hidden), features->rows.data(),
                    features->rows.size_bytes());
  }
  const auto n_rows = static_cast<std::int64_t>(args.logit_rows.size());
  const Matrix& head = weights_.output_matrix();
  // Logits kept in device memory (device-side verification) never touch the host vector.
  const bool keep_on_device = args.keep_logits_on_device && !backend_.host_memory();
  logits.resize(keep_on_device ? 0 : static_cast<std::size_t>(n_rows * head.rows));
  if (vocabulary != nullptr && vocabulary->local_size() > 0)
    workspace(draft_logits_, static_cast<std::size_t>(n_rows * vocabulary->local_size()));
  float* logits_out = backend_.host_memory()
                          ? logits.data()
                          : workspace(logits_, static_cast<std::size_t>(n_rows * head.rows));

  std::vector<float> observed;  // host copy for observers when the backend memory is a device's
  const bool observing = args.observer != nullptr && *args.observer;
  observe_only_ = args.observe_only;
  Observe observe;
  if (observing)
    observe = [&](std::string_view name, int layer, const float* data, std::int64_t rows) {
      const auto count = static_cast<std::size_t>(rows * hidden);
      if (backend_.host_memory()) {
        (*args.observer)(name, layer, {data, count}, rows);
      } else {
        observed.resize(count);
        backend_.download(observed.data(), data, count * sizeof(float));
        (*args.observer)(name, layer, observed, rows);
      }
    };

  ensure_rope_positions(args.positions);
  const std::int64_t n_past =
      features != nullptr ? features->first_slot : (segmented ? 0 : kv.length());
  const ForwardInputs inputs{args.tokens,     args.positions,
                             n_past,          args.mask != nullptr ? args.mask->data() : nullptr,
                             args.logit_rows, args.segments};
  // What shapes the launches, for backends that record them (CUDA graphs): the plan, the token
  // count, a tree mask's presence, the logit rows and the KV cache. Observers call back into the
  // host, and collectives through a host communicator leave the device, so such passes cannot be
  // recorded.
  std::array<std::uint64_t, LayerPlan::kMaskWords> plan_words{};
  plan.to_mask(plan_words);
  LaunchShape shape;
  shape.plan_words = plan_words;
  shape.n_tokens = n_tokens;
  shape.tree_mask = inputs.tree_mask != nullptr;
  shape.logit_rows = args.logit_rows;
  shape.kv_cache = kv.keys(0);
  shape.kv_capacity = kv.head_stride();
  shape.draft_vocabulary = vocabulary;
  shape.early_exit = args.draft.early_exit;
  shape.draft_weights = args.draft.draft_weights;
  shape.segmented = segmented;
  // A feature forward's launches differ from a full forward's of the same shape (and its input
  // rows come from the host each time): it runs eagerly.
  shape.recordable = !observing && features == nullptr &&
                     (comm_.size() == 1 || comm_.device_collectives_recordable());
  backend_.run_forward(inputs, shape, [&] {
    if (features != nullptr) {
      run_feature_head(n_tokens, n_rows, kv, logits_out, vocabulary, args.draft.draft_weights,
                       observe);
    } else {
      run_layers(plan, inputs, kv, n_tokens, logits_out, vocabulary, args.draft.early_exit,
                 args.draft.draft_weights, observe);
    }
  });
  if (!keep_on_device && n_rows > 0 && !backend_.host_memory()) {
    backend_.download(logits.data(), logits_out, logits.size() * sizeof(float));
  }
  if (!segmented && features == nullptr) kv.extend(n_tokens);
  ++counters_.forwards;
  counters_.tokens += n_tokens;
  counters_.total_seconds += seconds_since(start);
  if (keep_on_device) return {logits_out, n_rows, head.rows, true};
  return {logits.data(), n_rows, head.rows, false};
}

void LlamaModel::run_layers(const LayerPlan& plan, const ForwardInputs& inputs, KvCache& kv,
                            std::int64_t n_tokens, float* logits_out,
                            const DraftVocabulary* vocabulary, bool early_exit, bool draft_weights,
                            const Observe& observe) {
  const std::int64_t hidden = config_.hidden_size;
  float* x = x_.as<float>();
  pending_ = nullptr;
  backend_.embedding(weights_.embedding.view(), shard_.vocab.begin, x);
  all_reduce(x, n_tokens * hidden);
  if (observes(observe, "embed")) observe("embed", -1, x, n_tokens);

  // With the exit head's layer in the cache: its K/V after layer N - 1 (side branch), or, for an
  // early-exit forward, the head itself in place of layers [N, L).
  const bool head_in_cache = kv.num_layers() == config_.num_layers + 1;
  const int n_exit = head_in_cache && exit_head_ ? exit_head_->exit_layer : -1;
  const int last = early_exit ? n_exit : static_cast<int>(config_.num_layers);
  const std::vector<LayerWeights>& layers = draft_weights ? draft_->layers : weights_.layers;
  for (int l = 0; l < last; ++l) {
    const LayerWeights& w = layers[static_cast<std::size_t>(l)];
    if (l == n_exit && !early_exit) exit_kv_branch(kv, n_tokens);
    if (plan.runs_attention(l)) attention_block(w, l, kv, n_tokens, draft_weights);
    if (observes(observe, "attn_out")) {
      flush_residual(n_tokens);
      observe("attn_out", l, x, n_tokens);
    }
    if (plan.runs_mlp(l)) mlp_block(w, l, n_tokens, draft_weights);
    if (observes(observe, "mlp_out")) {
      flush_residual(n_tokens);
      observe("mlp_out", l, x, n_tokens);
    }
  }
  if (early_exit) {
    const LayerWeights& w = exit_head_->weights;
    const auto kv_layer = static_cast<int>(config_.num_layers);
    attention_block(w, kv_layer, kv, n_tokens);
    mlp_block(w, kv_layer, n_tokens);
    if (observes(observe, "exit_out")) {
      flush_residual(n_tokens);
      observe("exit_out", kv_layer, x, n_tokens);
    }
  }
  flush_residual(n_tokens);
  if (observes(observe, "final_residual")) {
    observe("final_residual", static_cast<int>(config_.num_layers), x, n_tokens);
  }

  lm_head(static_cast<std::int64_t>(inputs.logit_rows.size()),
          draft_weights ? draft_->output : weights_.output_matrix(), logits_out, vocabulary,
          observe);
}

void LlamaModel::check_feature_forward(const ForwardArgs& args, KvCache& kv) const {
  const FeatureRows& features = *args.draft.features;
  const auto n_tokens = static_cast<std::int64_t>(args.tokens.size());
  SELFSPEC_CHECK(feature_head_.has_value(),
                 "a feature-head draft forward needs a feature head attached (--feature-head)");
  SELFSPEC_CHECK(kv.num_layers() == config_.num_layers + 1,
                 "a feature-head draft forward needs a KV cache made with the head's layer");
  SELFSPEC_CHECK(args.draft.plan == nullptr && !args.draft.early_exit && args.segments.empty() &&
                     (args.mask == nullptr || args.mask->is_causal()),
                 "a feature-head draft forward runs the head alone, over one sequence, causally");
  SELFSPEC_CHECK(
      features.rows.size() == static_cast<std::size_t>(n_tokens * config_.hidden_size),
      "a feature-head draft forward of {} tokens got {} feature values, expected {} x {}", n_tokens,
      features.rows.size(), n_tokens, config_.hidden_size);
  SELFSPEC_CHECK(features.first_slot >= 0 && features.first_slot + n_tokens <= kv.capacity(),
                 "a feature-head draft forward at slots [{}, {}) is outside the cache's {} slots",
                 features.first_slot, features.first_slot + n_tokens, kv.capacity());
}

void LlamaModel::run_feature_head(std::int64_t n_tokens, std::int64_t n_rows, KvCache& kv,
                                  float* logits_out, const DraftVocabulary* vocabulary,
                                  bool draft_weights, const Observe& observe) {
  // u = fc_feature · n(h) + fc_embedding · E(x) + b, then the head's layer over its own cache
  // layer (index num_layers), then the final norm and the LM head.
  const FeatureHead& head = *feature_head_;
  const std::int64_t hidden = config_.hidden_size;
  float* x = x_.as<float>();
  float* h = h_.as<float>();
  float* o = o_.as<float>();
  pending_ = nullptr;
  backend_.embedding(weights_.embedding.view(), shard_.vocab.begin, x);
  all_reduce(x, n_tokens * hidden);
  backend_.matmul(x, n_tokens, head.fc_embedding.view(), o);
  backend_.rmsnorm(features_.as<float>(), weights_.final_norm.ptr(),
                   static_cast<float>(config_.rms_norm_eps), n_tokens, hidden, h);
  backend_.matmul(h, n_tokens, head.fc_feature.view(), x);
  backend_.add_inplace(x, o, n_tokens * hidden);
  backend_.add_bias(x, head.fc_bias.ptr(), n_tokens, hidden);
  const auto kv_layer = static_cast<int>(config_.num_layers);
  attention_block(head.layer, kv_layer, kv, n_tokens);
  mlp_block(head.layer, kv_layer, n_tokens);
  flush_residual(n_tokens);
  if (observes(observe, "final_residual")) observe("final_residual", kv_layer, x, n_tokens);
  lm_head(n_rows, draft_weights ? draft_->output : weights_.output_matrix(), logits_out, vocabulary,
          observe);
}

void LlamaModel::lm_head(std::int64_t n_rows, const Matrix& output, float* logits_out,
                         const DraftVocabulary* vocabulary, const Observe& observe) {
  if (n_rows == 0) return;
  const std::int64_t hidden = config_.hidden_size;
  float* h = h_.as<float>();
  backend_.gather_rows(x_.as<float>(), hidden, h);
  backend_.rmsnorm(h, weights_.final_norm.ptr(), static_cast<float>(config_.rms_norm_eps), n_rows,
                   hidden, h);
  if (observes(observe, "final_norm")) {
    observe("final_norm", static_cast<int>(config_.num_layers), h, n_rows);
  }
  if (vocabulary == nullptr) {
    backend_.matmul(h, n_rows, output.view(), logits_out);
    return;
  }
  const std::int64_t kept = vocabulary->local_size();
  if (kept > 0) backend_.matmul(h, n_rows, vocabulary->head(), draft_logits_.as<float>());
  backend_.scatter_columns(draft_logits_.as<float>(), n_rows, vocabulary->device_ids(), kept,
                           vocab_local(), -std::numeric_limits<float>::infinity(), logits_out);
}

void LlamaModel::exit_kv_branch(KvCache& kv, std::int64_t n_tokens) {
  // The residual stream as the next layer sees it (the same bits add_rmsnorm would give it), the
  // head's input norm into the scratch h, then only K and V: the head's attention output is not
  // needed for tokens the target computes.
  const LayerWeights& w = exit_head_->weights;
  flush_residual(n_tokens);
  backend_.rmsnorm(x_.as<float>(), w.attention_norm.ptr(), static_cast<float>(config_.rms_norm_eps),
                   n_tokens, config_.hidden_size, h_.as<float>());
  write_layer_kv(w, static_cast<int>(config_.num_layers), kv, n_tokens);
}

void LlamaModel::write_layer_kv(const LayerWeights& w, int layer, KvCache& kv,
                                std::int64_t n_tokens) {
  // K and V of the scratch h only (the exit head's side branch): one fused matmul, then RoPE on
  // K and the cache write in one op.
  float* k = k_.as<float>();
  float* v = v_.as<float>();
  const BackendWeight weights[] = {w.wk.view(), w.wv.view()};
  float* const outputs[] = {k, v};
  backend_.matmul_many(h_.as<float>(), n_tokens, weights, outputs);
  add_kv_biases(w, n_tokens);
  rope_and_write_kv(nullptr, layer, kv);
}

void LlamaModel::add_kv_biases(const LayerWeights& w, std::int64_t n_tokens) {
  if (w.bk.empty()) return;
  const std::int64_t kv_width = kv_local_ * config_.head_dim;
  backend_.add_bias(k_.as<float>(), w.bk.ptr(), n_tokens, kv_width);
  backend_.add_bias(v_.as<float>(), w.bv.ptr(), n_tokens, kv_width);
}

Backend::RopeKv LlamaModel::rope_kv_args(float* q) {
  const std::int64_t hd = config_.head_dim;
  Backend::RopeKv args;
  args.q = q;
  args.q_stride = q_local_ * hd;
  args.n_q_heads = q != nullptr ? q_local_ : 0;
  args.k = k_.as<float>();
  args.v = v_.as<float>();
  args.kv_heads = kv_local_;
  args.head_dim = hd;
  return args;
}

void LlamaModel::rope_and_write_kv(float* q, int layer, KvCache& kv) {
  backend_.rope_write_kv(rope_kv_args(q), {rope_table_.as<float>(), rope_positions_},
                         kv.layer(layer));
}

void LlamaModel::attention_block(const LayerWeights& w, int layer, KvCache& kv,
                                 std::int64_t n_tokens, bool draft) {
  const std::int64_t hidden = config_.hidden_size;
  const std::int64_t hd = config_.head_dim;
  const std::int64_t q_width = q_local_ * hd;
  float* q = q_.as<float>();
  float* o = o_.as<float>();

  // Q, K and V in one fused matmul (each output as its own matmul would give it), the norm
  // folded in where the backend offers it, and RoPE with the cache write in its epilogue where
  // the backend offers that (no biases to add between them).
  const BackendWeight weights[] = {w.wq.view(), w.wk.view(), w.wv.view()};
  float* const outputs[] = {q, k_.as<float>(), v_.as<float>()};
  const bool fold_norm = pending_ == nullptr && backend_.fuses_norm(n_tokens, weights);
  if (!fold_norm) norm(w.attention_norm, n_tokens);
  const float* input = fold_norm ? x_.as<float>() : h_.as<float>();
  const float* norm_weight = fold_norm ? w.attention_norm.ptr() : nullptr;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  if (w.bq.empty() && w.bk.empty() && w.bv.empty() &&
      backend_.fuses_rope_kv(n_tokens, weights, hd)) {
    backend_.matmul_rope_kv(input, norm_weight, eps, n_tokens, weights, rope_kv_args(q),
                            {rope_table_.as<float>(), rope_positions_}, kv.layer(layer));
  } else {
    if (fold_norm) {
      backend_.norm_matmul_many(input, norm_weight, eps, n_tokens, weights, outputs);
    } else {
      backend_.matmul_many(input, n_tokens, weights, outputs);
    }
    if (!w.bq.empty()) backend_.add_bias(q, w.bq.ptr(), n_tokens, q_width);
    add_kv_biases(w, n_tokens);
    rope_and_write_kv(q, layer, kv);
  }
  backend_.attention(q, kv.layer(layer), q_local_, kv_local_, hd,
                     static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))),
                     attn_.as<float>());
  const LayerChunks* chunks = layer_chunks(layer, draft);
  if (w.bo.empty() && residual_add_fused(n_tokens, w.wo, chunks)) {
    backend_.matmul_accumulate(attn_.as<float>(), n_tokens, w.wo.view(), x_.as<float>());
    return;
  }
  row_parallel(attn_.as<float>(), n_tokens, w.wo, chunks != nullptr ? &chunks->wo : nullptr, o);
  if (!w.bo.empty()) backend_.add_bias(o, w.bo.ptr(), n_tokens, hidden);
  pending_ = o;
}

void LlamaModel::mlp_block(const LayerWeights& w, int layer, std::int64_t n_tokens, bool draft) {
  float* h = h_.as<float>();
  float* gate = gate_.as<float>();
  float* o = o_.as<float>();
  const BackendWeight gate_up[] = {w.w_gate.view(), w.w_up.view()};
  if (pending_ == nullptr && backend_.fuses_norm(n_tokens, gate_up)) {
    backend_.norm_matmul_swiglu(x_.as<float>(), w.mlp_norm.ptr(),
                                static_cast<float>(config_.rms_norm_eps), n_tokens, gate_up[0],
                                gate_up[1], gate);
  } else {
    norm(w.mlp_norm, n_tokens);  // consumes a pending delta in o before o is written again
    backend_.matmul_swiglu(h, n_tokens, gate_up[0], gate_up[1], up_.as<float>(), gate);
  }
  const LayerChunks* chunks = layer_chunks(layer, draft);
  if (residual_add_fused(n_tokens, w.w_down, chunks)) {
    backend_.matmul_accumulate(gate, n_tokens, w.w_down.view(), x_.as<float>());
    return;
  }
  row_parallel(gate, n_tokens, w.w_down, chunks != nullptr ? &chunks->down : nullptr, o);
  pending_ = o;
}

bool LlamaModel::residual_add_fused(std::int64_t n_tokens, const Matrix& w,
                                    const LayerChunks* chunks) const {
  // One rank (no all-reduce between the product and the add), the plain projection (not a
  // fixed partition's chunks), and the residual stream up to date.
  return comm_.size() == 1 && chunks == nullptr && pending_ == nullptr &&
         backend_.fuses_residual_add(n_tokens, w.view());
}

}  // namespace selfspec
