// LlamaModel::forward against the Backend's forward-pass contract, without a GPU. A backend that
// wraps the CPU backend sees one run_forward per forward, with the LaunchShape the forward
// describes (plan words, T, tree-mask presence, logit rows, KV cache; recordable except with an
// observer or a host communicator), every op inside the launches and no allocation there; passes
// with equal launch keys issue identical launches; and a CPU emulation of CUDA graphs (eager the
// first time a key is seen, recorded the second, then the recorded ops replayed without calling
// the launches; every allocation drops the recordings) gives the eager logits bit for bit.
#include "backend/backend.hpp"
#include "backend/shard_reductions.hpp"
#include "comm/local_comm.hpp"
#include "model/attention_mask.hpp"
#include "model/layer_plan.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

namespace selfspec::testing {
namespace {

// One op argument as a word: pointers by address, scalars by value (floats by their bits).
template <typename T>
std::uintptr_t word(const T* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer);
}
std::uintptr_t word(std::int64_t value) {
  return static_cast<std::uintptr_t>(value);
}
std::uintptr_t word(float value) {
  return std::bit_cast<std::uint32_t>(value);
}
std::uintptr_t word(const BackendWeight& w) {
  return word(w.data);
}

struct OpCall {
  std::string name;
  std::vector<std::uintptr_t> args;
  bool operator==(const OpCall&) const = default;
};

enum class Run { kEager, kRecord, kReplay };

// One run_forward as the backend saw it.
struct Pass {
  std::vector<std::uint64_t> plan_words;
  std::int64_t n_tokens = 0;
  bool tree_mask = false;
  std::vector<std::int32_t> logit_rows;
  const void* kv_cache = nullptr;
  std::int64_t kv_capacity = 0;
  bool recordable = false;
  std::uint64_t key = 0;
  Run run = Run::kEager;
  std::vector<OpCall> ops;  // what the launches issued (none for a replay)
};

std::vector<std::uint64_t> words_of(const LayerPlan& plan) {
  std::array<std::uint64_t, LayerPlan::kMaskWords> words{};
  plan.to_mask(words);
  return {words.begin(), words.end()};
}

// Wraps a CPU backend and records every pass. With `emulate_graphs`, it follows the CUDA
// backend's policy on the CPU: a recordable pass of at most kMaxRecordedTokens tokens runs
// eagerly the first time its launch key is seen, is recorded (and run) the second time, and from
// then on its recorded ops are replayed on the new inputs without calling the launches; every
// allocation drops the recordings.
class RecordingBackend final : public Backend {
 public:
  static constexpr std::int64_t kMaxRecordedTokens = 16;
  explicit RecordingBackend(bool emulate_graphs) : emulate_graphs_(emulate_graphs) {}

  const std::vector<Pass>& passes() const { return passes_; }
  int ops_outside_passes() const { return ops_outside_passes_; }
  int allocations_in_passes() const { return allocations_in_passes_; }
  int count(Run run) const {
    return static_cast<int>(
        std::count_if(passes_.begin(), passes_.end(), [&](const Pass& p) { return p.run == run; }));
  }

  DeviceKind kind() const override { return inner_->kind(); }
  BackendDescription description() const override { return inner_->description(); }
  DeviceBuffer allocate(std::size_t bytes) override {
    if (in_pass_) ++allocations_in_passes_;
    recordings_.clear();
    return inner_->allocate(bytes);
  }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    inner_->upload(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    inner_->download(dst, src, bytes);
  }
  bool host_memory() const override { return inner_->host_memory(); }
  std::unique_ptr<ShardReductions> make_shard_reductions(VocabShard shard) override {
    return inner_->make_shard_reductions(std::move(shard));
  }
  bool runs_format(WeightFormat format) const override { return inner_->runs_format(format); }
  DeviceBuffer make_weight(const HostWeight& host) override {
    recordings_.clear();
    return inner_->make_weight(host);
  }
  DeviceBuffer select_weight_rows(const BackendWeight& w,
                                  std::span<const std::int32_t> rows) override {
    recordings_.clear();
    return inner_->select_weight_rows(w, rows);
  }
  DeviceBuffer select_weight_cols(const BackendWeight& w, std::int64_t begin,
                                  std::int64_t end) override {
    recordings_.clear();
    return inner_->select_weight_cols(w, begin, end);
  }
  void compact_rows(void* base, std::int64_t blocks, std::int64_t block_stride,
                    std::int64_t rows_per_block, std::int64_t row_bytes,
                    std::span<const std::int32_t> from, std::int64_t to) override {
    inner_->compact_rows(base, blocks, block_stride, rows_per_block, row_bytes, from, to);
  }

  void embedding(const BackendWeight& table, std::int64_t vocab_begin, float* out) override {
    issue("embedding", {word(table), word(vocab_begin), word(out)},
          [=, this] { inner_->embedding(table, vocab_begin, out); });
  }
  void rmsnorm(const float* x, const float* weight, float eps, std::int64_t rows, std::int64_t dim,
               float* y) override {
    issue("rmsnorm", {word(x), word(weight), word(eps), word(rows), word(dim), word(y)},
          [=, this] { inner_->rmsnorm(x, weight, eps, rows, dim, y); });
  }
  void add_rmsnorm(float* x, const float* delta, const float* weight, float eps, std::int64_t rows,
                   std::int64_t dim, float* y) override {
    issue("add_rmsnorm",
          {word(x), word(delta), word(weight), word(eps), word(rows), word(dim), word(y)},
          [=, this] { inner_->add_rmsnorm(x, delta, weight, eps, rows, dim, y); });
  }
  void matmul(const float* x, std::int64_t rows, const BackendWeight& w, float* y) override {
    issue("matmul", {word(x), word(rows), word(w), word(y)},
          [=, this] { inner_->matmul(x, rows, w, y); });
  }
  void add_bias(float* x, const float* bias, std::int64_t rows, std::int64_t dim) override {
    issue("add_bias", {word(x), word(bias), word(rows), word(dim)},
          [=, this] { inner_->add_bias(x, bias, rows, dim); });
  }
  void rope(float* x, std::int64_t row_stride, std::int64_t n_heads, std::int64_t head_dim,
            const RopeTable& table) override {
    issue("rope",
          {word(x), word(row_stride), word(n_heads), word(head_dim), word(table.cos_sin),
           word(table.positions)},
          [=, this] { inner_->rope(x, row_stride, n_heads, head_dim, table); });
  }
  void write_kv(const float* k, const float* v, std::int64_t kv_heads, std::int64_t head_dim,
                const KvLayer& cache) override {
    issue("write_kv",
          {word(k), word(v), word(kv_heads), word(head_dim), word(cache.head_stride),
           word(cache.keys), word(cache.values), word(static_cast<std::int64_t>(cache.dtype))},
          [=, this] { inner_->write_kv(k, v, kv_heads, head_dim, cache); });
  }
  void attention(const float* q, const KvLayer& cache, std::int64_t n_q_heads,
                 std::int64_t n_kv_heads, std::int64_t head_dim, float scale, float* out) override {
    issue("attention",
          {word(q), word(cache.keys), word(cache.values),
           word(static_cast<std::int64_t>(cache.dtype)), word(n_q_heads), word(n_kv_heads),
           word(head_dim), word(cache.head_stride), word(scale), word(out)},
          [=, this] { inner_->attention(q, cache, n_q_heads, n_kv_heads, head_dim, scale, out); });
  }
  void swiglu(const float* gate, const float* up, float* out, std::int64_t n) override {
    issue("swiglu", {word(gate), word(up), word(out), word(n)},
          [=, this] { inner_->swiglu(gate, up, out, n); });
  }
  void add_inplace(float* x, const float* y, std::int64_t n) override {
    issue("add_inplace", {word(x), word(y), word(n)}, [=, this] { inner_->add_inplace(x, y, n); });
  }
  void gather_rows(const float* src, std::int64_t dim, float* dst) override {
    issue("gather_rows", {word(src), word(dim), word(dst)},
          [=, this] { inner_->gather_rows(src, dim, dst); });
  }
  void scatter_columns(const float* values, std::int64_t rows, const std::int32_t* ids,
                       std::int64_t n_ids, std::int64_t width, float fill, float* out) override {
    issue("scatter_columns",
          {word(values), word(rows), word(ids), word(n_ids), word(width), word(fill), word(out)},
          [=, this] { inner_->scatter_columns(values, rows, ids, n_ids, width, fill, out); });
  }
  void all_reduce(Communicator& comm, float* data, std::int64_t count) override {
    issue("all_reduce", {word(&comm), word(data), word(count)},
          [=, this, &comm] { inner_->all_reduce(comm, data, count); });
  }

 protected:
  void forward_pass(const ForwardInputs& inputs, const LaunchShape& shape,
                    const std::function<void()>& launches) override {
    Pass pass;
    pass.plan_words.assign(shape.plan_words.begin(), shape.plan_words.end());
    pass.n_tokens = shape.n_tokens;
    pass.tree_mask = shape.tree_mask;
    pass.logit_rows.assign(shape.logit_rows.begin(), shape.logit_rows.end());
    pass.kv_cache = shape.kv_cache;
    pass.kv_capacity = shape.kv_capacity;
    pass.recordable = shape.recordable;
    pass.key = launch_key(shape);
    const std::uint64_t key = pass.key;
    passes_.push_back(std::move(pass));

    in_pass_ = true;
    const bool graphable =
        emulate_graphs_ && shape.recordable && shape.n_tokens <= kMaxRecordedTokens;
    Recording& recording = recordings_[key];
    if (graphable && recording.recorded) {
      passes_.back().run = Run::kReplay;
      inner_->run_forward(inputs, shape, [&] {
        for (const auto& op : recording.ops) op();
      });
    } else if (graphable && recording.seen++ > 0) {
      passes_.back().run = Run::kRecord;
      std::vector<std::function<void()>> ops;
      recording_ = &ops;
      inner_->run_forward(inputs, shape, launches);
      recording_ = nullptr;
      recordings_[key] = {1, true, std::move(ops)};
    } else {
      inner_->run_forward(inputs, shape, launches);
    }
    in_pass_ = false;
  }
  // The inner backend stages the inputs and completes the pass (forward_pass above).
  void begin_forward(const ForwardInputs&) override { ADD_FAILURE() << "begin_forward called"; }
  void end_forward() override { ADD_FAILURE() << "end_forward called"; }

 private:
  struct Recording {
    int seen = 0;
    bool recorded = false;
    std::vector<std::function<void()>> ops;
  };

  void issue(const char* name, std::vector<std::uintptr_t> args, std::function<void()> op) {
    if (in_pass_) {
      passes_.back().ops.push_back({name, std::move(args)});
    } else {
      ++ops_outside_passes_;
    }
    if (recording_ != nullptr) recording_->push_back(op);
    op();
  }

  std::unique_ptr<Backend> inner_ = make_cpu_backend();
  bool emulate_graphs_;
  std::vector<Pass> passes_;
  std::unordered_map<std::uint64_t, Recording> recordings_;
  std::vector<std::function<void()>>* recording_ = nullptr;
  bool in_pass_ = false;
  int ops_outside_passes_ = 0;
  int allocations_in_passes_ = 0;
};

// Two tensor-parallel ranks seen from rank 0, with the other rank contributing nothing: enough
// for forwards to run (on a half-model shard), with or without device-buffer collectives.
class TwoRankComm final : public Communicator {
 public:
  explicit TwoRankComm(bool device_buffers) : device_buffers_(device_buffers) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string_view name() const override { return "two-rank fake"; }
  void all_reduce_sum(std::span<float>) override {}
  void broadcast(std::span<std::byte>, int) override {}
  void gather(std::span<const float>, std::span<float>, std::span<const std::int64_t>,
              int) override {}
  void all_gather(std::span<const float>, std::span<float>,
                  std::span<const std::int64_t>) override {}
  void gather_bytes(std::span<const std::byte>, std::span<std::byte>, int) override {}
  void all_gather_u64(std::uint64_t, std::span<std::uint64_t>) override {}
  void barrier() override {}
  bool supports_device_buffers() const override { return device_buffers_; }

 private:
  bool device_buffers_;
};

// One forward at positions kv.length()..., returning the logits of `rows`.
std::vector<float> run(LlamaModel& model, KvCache& kv, const std::vector<std::int32_t>& tokens,
                       const std::vector<std::int32_t>& rows, const LayerPlan* plan = nullptr,
                       const AttentionMask* mask = nullptr,
                       const ForwardObserver* observer = nullptr) {
  return forward_rows(model, kv, tokens, rows, plan, mask, {}, observer);
}

std::vector<std::int32_t> all_rows(std::size_t n) {
  std::vector<std::int32_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

int count_ops(const Pass& pass, const std::string& name) {
  return static_cast<int>(std::count_if(pass.ops.begin(), pass.ops.end(),
                                        [&](const OpCall& op) { return op.name == name; }));
}

class ForwardContractTest : public ::testing::Test {
 protected:
  ForwardContractTest() {
    TinyModelSpec spec;
    spec.layers = 3;
    write_tiny_checkpoint(spec, dir_.path());
  }

  TempDir dir_;
  LocalComm comm_;
  const LayerPlan full_ = LayerPlan::full(3);
  const LayerPlan draft_ = LayerPlan::skipping(3, std::vector<int>{1}, std::vector<int>{0, 2});
};

TEST_F(ForwardContractTest, OneRunForwardPerForwardDescribingItsLaunches) {
  RecordingBackend backend(false);
  const auto model = load_model_on(backend, dir_.path(), comm_);
  KvCache kv = model->make_kv_cache(32);

  // A prefill: every row's logits.
  run(*model, kv, {1, 17, 4, 33, 9}, all_rows(5));
  ASSERT_EQ(backend.passes().size(), 1u);
  const Pass& prefill = backend.passes()[0];
  EXPECT_EQ(prefill.n_tokens, 5);
  EXPECT_EQ(prefill.logit_rows, all_rows(5));
  EXPECT_FALSE(prefill.tree_mask);
  EXPECT_EQ(prefill.plan_words, words_of(full_));
  EXPECT_EQ(prefill.kv_cache, kv.keys(0));
  EXPECT_EQ(prefill.kv_capacity, 32);
  EXPECT_TRUE(prefill.recordable);
  EXPECT_EQ(count_ops(prefill, "attention"), 3);
  EXPECT_EQ(count_ops(prefill, "swiglu"), 3);

  // A draft step: one token through a skipping plan.
  run(*model, kv, {7}, {0}, &draft_);
  ASSERT_EQ(backend.passes().size(), 2u);
  const Pass& draft = backend.passes()[1];
  EXPECT_EQ(draft.n_tokens, 1);
  EXPECT_EQ(draft.logit_rows, std::vector<std::int32_t>{0});
  EXPECT_EQ(draft.plan_words, words_of(draft_));
  EXPECT_NE(draft.plan_words, words_of(full_));
  EXPECT_TRUE(draft.recordable);
  EXPECT_EQ(count_ops(draft, "attention"), 2) << "layer 1's attention is skipped";
  EXPECT_EQ(count_ops(draft, "swiglu"), 1) << "layers 0 and 2's MLPs are skipped";

  // A tree verification: three tokens, token 2 does not see token 1; logits of rows 0 and 2.
  const AttentionMask tree = AttentionMask::tree(3, {1, 0, 0, 1, 1, 0, 1, 0, 1});
  run(*model, kv, {3, 8, 2}, {0, 2}, nullptr, &tree);
  ASSERT_EQ(backend.passes().size(), 3u);
  const Pass& verify = backend.passes()[2];
  EXPECT_EQ(verify.n_tokens, 3);
  EXPECT_TRUE(verify.tree_mask);
  EXPECT_EQ(verify.logit_rows, (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(verify.kv_cache, kv.keys(0));

  // A causal mask object is no tree mask; another cache is another cache.
  const AttentionMask causal = AttentionMask::causal();
  KvCache other = model->make_kv_cache(48);
  run(*model, other, {5, 6}, {1}, nullptr, &causal);
  ASSERT_EQ(backend.passes().size(), 4u);
  EXPECT_FALSE(backend.passes()[3].tree_mask);
  EXPECT_EQ(backend.passes()[3].kv_cache, other.keys(0));
  EXPECT_EQ(backend.passes()[3].kv_capacity, 48);
  EXPECT_NE(backend.passes()[3].kv_cache, kv.keys(0));

  EXPECT_EQ(backend.ops_outside_passes(), 0) << "every op belongs to a pass's launches";
  EXPECT_EQ(backend.allocations_in_passes(), 0) << "nothing is allocated inside the launches";
}

TEST_F(ForwardContractTest, ObservedForwardsAreNotRecordable) {
  RecordingBackend backend(false);
  const auto model = load_model_on(backend, dir_.path(), comm_);
  KvCache kv = model->make_kv_cache(32);
  int observed = 0;
  const ForwardObserver observer = [&](std::string_view, int, std::span<const float>,
                                       std::int64_t) { ++observed; };
  run(*model, kv, {1, 2}, {1}, nullptr, nullptr, &observer);
  run(*model, kv, {3}, {0});
  ASSERT_EQ(backend.passes().size(), 2u);
  EXPECT_FALSE(backend.passes()[0].recordable);
  EXPECT_GT(observed, 0);
  EXPECT_TRUE(backend.passes()[1].recordable);
}

TEST_F(ForwardContractTest, CollectivesThroughAHostCommunicatorAreNotRecordable) {
  for (const bool device_buffers : {false, true}) {
    RecordingBackend backend(false);
    TwoRankComm comm(device_buffers);
    const auto model = load_model_on(backend, dir_.path(), comm);
    KvCache kv = model->make_kv_cache(16);
    run(*model, kv, {4}, {0});
    ASSERT_EQ(backend.passes().size(), 1u);
    EXPECT_EQ(backend.passes()[0].recordable, device_buffers)
        << (device_buffers ? "device" : "host") << " collectives";
    EXPECT_GT(count_ops(backend.passes()[0], "all_reduce"), 0);
    EXPECT_EQ(backend.ops_outside_passes(), 0);
  }
}

TEST_F(ForwardContractTest, EqualLaunchKeysIssueIdenticalLaunches) {
  RecordingBackend backend(false);
  const auto model = load_model_on(backend, dir_.path(), comm_);
  KvCache kv = model->make_kv_cache(64);
  // On the CPU the LM head writes straight into the caller's logits: one buffer for every pass,
  // so that its address is part of the launches like the workspaces' (whatever the allocator).
  std::vector<float> logits;
  logits.reserve(static_cast<std::size_t>(4 * model->vocab_local()));
  const auto forward = [&](const std::vector<std::int32_t>& tokens,
                           const std::vector<std::int32_t>& rows, const LayerPlan* plan = nullptr) {
    forward_rows_into(logits, *model, kv, tokens, rows, plan);
  };
  forward({1, 17, 4, 33}, all_rows(4));
  for (std::int32_t step = 0; step < 4; ++step) {
    forward({(5 * step + 3) % 64}, {0}, &draft_);
    forward({(7 * step + 2) % 64}, {0});
    forward({step, step + 1, step + 2}, {0, 1, 2});
    kv.truncate(kv.length() - 2);
  }
  // Passes grouped by key: identical launches within a group, whatever the KV length and tokens.
  std::map<std::uint64_t, std::vector<const Pass*>> groups;
  for (const Pass& pass : backend.passes()) groups[pass.key].push_back(&pass);
  ASSERT_EQ(groups.size(), 4u) << "prefill, draft, decode, verification";
  std::vector<const Pass*> firsts;
  for (const auto& [key, passes] : groups) {
    firsts.push_back(passes.front());
    for (const Pass* pass : passes) {
      EXPECT_EQ(pass->ops, passes.front()->ops) << "key " << key;
    }
  }
  for (std::size_t a = 0; a < firsts.size(); ++a) {
    for (std::size_t b = a + 1; b < firsts.size(); ++b) {
      EXPECT_NE(firsts[a]->ops, firsts[b]->ops) << "different keys, different launches";
    }
  }
  EXPECT_EQ(backend.allocations_in_passes(), 0);
}

TEST_F(ForwardContractTest, ReplayedRecordingsGiveTheEagerLogitsBitForBit) {
  RecordingBackend backend(true);
  const auto graphed = load_model_on(backend, dir_.path(), comm_);
  const auto eager = load_model(dir_.path(), comm_);
  KvCache graphed_kv = graphed->make_kv_cache(64);
  KvCache eager_kv = eager->make_kv_cache(64);
  // The recorded launches write the logits where they wrote them when recorded: like a device
  // backend's workspace, the output buffer must not move (its capacity covers the longest pass).
  std::vector<float> a;
  std::vector<float> b;
  a.reserve(static_cast<std::size_t>(20 * graphed->vocab_local()));
  int calls = 0;
  const auto both = [&](const std::vector<std::int32_t>& tokens,
                        const std::vector<std::int32_t>& rows, const LayerPlan* plan,
                        const AttentionMask* mask = nullptr) {
    forward_rows_into(a, *graphed, graphed_kv, tokens, rows, plan, mask);
    forward_rows_into(b, *eager, eager_kv, tokens, rows, plan, mask);
    EXPECT_TRUE(bit_identical(a, b)) << "call " << calls;
    ++calls;
  };
  const auto truncate = [&](std::int64_t n) {
    graphed_kv.truncate(graphed_kv.length() - n);
    eager_kv.truncate(eager_kv.length() - n);
  };
  const AttentionMask tree = AttentionMask::tree(3, {1, 0, 0, 1, 1, 0, 1, 0, 1});
  // Speculative rounds: two drafts (rolled back), a verification of three tokens (one rejected),
  // a decode step.
  const auto rounds = [&](int n, int salt) {
    for (int r = 0; r < n; ++r) {
      const std::int32_t t = (r * 11 + salt) % 60;
      both({t}, {0}, &draft_);
      both({t + 1}, {0}, &draft_);
      truncate(2);
      both({t, t + 2, t + 3}, {0, 1, 2}, nullptr, r % 2 == 0 ? &tree : nullptr);
      truncate(1);
      both({t + 4}, {0}, nullptr);  // a plain decode step: the draft's shape but the full plan
    }
  };
  both({1, 17, 4, 33, 9}, all_rows(5), nullptr);
  rounds(6, 3);
  const int replays_before = backend.count(Run::kReplay);
  EXPECT_GT(replays_before, 0);
  EXPECT_GT(backend.count(Run::kRecord), 0);

  // A longer chunk grows the workspaces: the allocations drop the recordings, so the next
  // draft runs eagerly again before it is recorded and replayed anew.
  both(std::vector<std::int32_t>(20, 12), all_rows(20), nullptr);
  const std::size_t after_growth = backend.passes().size();
  rounds(4, 5);
  EXPECT_EQ(backend.passes()[after_growth].run, Run::kEager);
  EXPECT_GT(backend.count(Run::kReplay), replays_before);
  EXPECT_EQ(backend.allocations_in_passes(), 0);
}

}  // namespace
}  // namespace selfspec::testing
