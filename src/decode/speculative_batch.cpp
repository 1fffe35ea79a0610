#include "decode/speculative_batch.hpp"

#include "control/goodput_sizing.hpp"
#include "core/error.hpp"
#include "decode/decoder.hpp"
#include "decode/decoding_run.hpp"
#include "decode/forward_port.hpp"
#include "decode/sequence_fiber.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <string_view>

namespace selfspec {
namespace {

// What a forward reads besides its tokens: forwards with equal keys can share a pass.
struct PassKey {
  std::array<std::uint64_t, LayerPlan::kMaskWords> plan{};  // zeros: every sublayer
  bool full_plan = true;
  bool early_exit = false;
  bool draft_weights = false;
  const DraftVocabulary* vocabulary = nullptr;
  // A feature-head draft forward (its own rows and cache slots) runs alone: no two share a key.
  const FeatureRows* features = nullptr;

  static PassKey of(const DraftForward& draft) {
    PassKey key;
    if (draft.plan != nullptr) {
      draft.plan->to_mask(key.plan);
      key.full_plan = false;
    }
    key.early_exit = draft.early_exit;
    key.draft_weights = draft.draft_weights;
    key.vocabulary = draft.vocabulary;
    key.features = draft.features;
    return key;
  }
  bool operator==(const PassKey&) const = default;
  bool drafts() const {
    return !full_plan || early_exit || draft_weights || vocabulary != nullptr ||
           features != nullptr;
  }
};

// A forward a sequence's run waits for.
struct PendingForward {
  ForwardArgs args;
  KvCache* kv = nullptr;
  std::vector<float>* host_logits = nullptr;
  PassKey key;
  bool done = false;
  LogitRows result;
};

}  // namespace

// One slot: its KV region, its speculators, and the fiber of the request it serves.
class SequenceSlot final : public ForwardPort {
 public:
  // `area`: the slot's part of the batch's cache; each request runs in a region at its start.
  SequenceSlot(std::int64_t index, KvCache area)
      : index_(index), area_(std::move(area)), region_(area_.region(0, area_.capacity())) {}

  std::int64_t index() const { return index_; }
  std::int64_t request() const { return request_; }
  bool busy() const { return request_ >= 0; }
  std::optional<PendingForward>& pending() { return pending_; }
  // Waits for a forward: the fiber's side.
  bool waiting() const { return pending_.has_value() && !pending_->done; }

  void start(std::int64_t request, const SpeculativeRequest& spec, std::int64_t pass_tokens,
             SequenceSpeculators speculators, LlamaModel& model, Communicator& comm,
             const SpeculativeBatch::Hooks& hooks) {
    speculators_ = std::move(speculators);
    // The slots `selfspec generate` would give the request alone: a tree's node budget depends on
    // the room left in the cache, and with it the drafts (and sampled tokens).
    region_ = area_.region(0, static_cast<std::int64_t>(spec.prompt.size()) +
                                  std::max<std::int64_t>(spec.options.max_new_tokens, 1));
    request_ = request;
    prompt_ = spec.prompt;
    options_ = spec.options;
    options_.prefill_chunk = std::clamp<std::int64_t>(options_.prefill_chunk, 1, pass_tokens);
    on_token_ = hooks.on_token
                    ? TokenCallback([this, &hooks](std::int32_t t) { hooks.on_token(request_, t); })
                    : TokenCallback();
    Drafter* drafter = speculators_.drafter.get();
    DraftLengthController* controller = speculators_.controller.get();
    result_ = {};
    pending_.reset();
    outlook_ = {};
    fiber_ =
        std::make_unique<SequenceFiber>([this, &model, &comm, drafter, controller](SequenceFiber&) {
          run_request(model, comm, drafter, controller);
        });
  }

  // Runs the request on to its next forward, or to its end; true when it ended.
  bool resume() {
    fiber_->resume();
    return fiber_->done();
  }

  // The ended request's result; the slot is free afterwards.
  GenerationResult finish() {
    fiber_.reset();
    speculators_ = {};
    request_ = -1;
    return std::move(result_);
  }

  // Rank 0, for goodput sizing: whether the request speculates and has started its rounds, its
  // acceptance so far and its controller's K.
  bool sizable() const { return run_ != nullptr && speculators_.controller != nullptr; }
  DraftOutlook outlook() const {
    DraftOutlook outlook = outlook_;
    outlook.max_draft = std::min(speculators_.controller->max_draft(), kMaxDraftTokens);
    return outlook;
  }
  void limit_draft(int limit) { run_->limit_draft(limit); }

  // ForwardPort: the fiber waits for the loop's next pass.
  LogitRows forward(const ForwardArgs& args, KvCache& kv,
                    std::vector<float>& host_logits) override {
    pending_ = PendingForward{args, &kv, &host_logits, PassKey::of(args.draft), false, {}};
    fiber_->suspend();
    SELFSPEC_CHECK(pending_ && pending_->done, "a sequence resumed before its forward ran");
    const LogitRows result = pending_->result;
    pending_.reset();
    return result;
  }

 private:
  std::int64_t index_;
  KvCache area_;
  KvCache region_;
  std::int64_t request_ = -1;
  std::vector<std::int32_t> prompt_;
  GenerationOptions options_;
  TokenCallback on_token_;
  SequenceSpeculators speculators_;  // the request's (null: plain decoding)
  GenerationResult result_;
  std::optional<PendingForward> pending_;
  std::unique_ptr<SequenceFiber> fiber_;
  DecodingRun* run_ = nullptr;  // the request's run, while it exists
  DraftOutlook outlook_;        // its acceptance so far

  // The fiber's body: the request's decoding loop (Decoder::generate's), its forwards through
  // this port.
  void run_request(LlamaModel& model, Communicator& comm, Drafter* drafter,
                   DraftLengthController* controller) {
    region_.clear();
    check_generation_inputs(prompt_, options_, region_);
    if (options_.max_new_tokens == 0) return;
    DecodingRun run(model, comm, drafter, controller, options_, region_, on_token_, this);
    run_ = &run;
    struct Forget {
      DecodingRun*& run;
      ~Forget() { run = nullptr; }
    } forget{run_};
    run.first_token(prompt_);
    while (!run.finished()) {
      const Draft& draft = run.draft();
      const Verdict verdict = run.verify(draft);
      record_round(draft, verdict);
      run.commit(verdict);
    }
    result_ = run.finish();
  }

  void record_round(const Draft& draft, const Verdict& verdict) {
    if (draft.empty()) return;
    outlook_.accepted += verdict.accepted_count();
    if (verdict.accepted_count() < draft.drawn()) ++outlook_.rejected;
  }
};

class SpeculativeBatch::Loop {
 public:
  // `capacity`: KV slots per sequence.
  Loop(SpeculativeBatch& batch, RequestFeed& feed, std::int64_t capacity, const Hooks& hooks)
      : batch_(batch),
        model_(batch.model_),
        comm_(batch.comm_),
        feed_(feed),
        hooks_(hooks),
        capacity_(capacity),
        owner_(model_.make_kv_cache(batch.options_.batch * capacity_)) {
    for (std::int64_t s = 0; s < batch.options_.batch; ++s) {
      slots_.push_back(std::make_unique<SequenceSlot>(s, owner_.region(s * capacity_, capacity_)));
    }
    if (batch.options_.goodput && comm_.is_root()) sizer_.emplace();
  }

  void run() {
    while (true) {
      admit();
      resume_ready();
      if (std::none_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy(); })) {
        if (!feed_open_) return;
        continue;  // waiting for arrivals
      }
      run_passes();
    }
  }

  // KV slots per sequence for `requests`: options.capacity, or what the longest one needs.
  static std::int64_t capacity_for(const SpeculativeBatchOptions& options,
                                   std::span<const SpeculativeRequest> requests) {
    std::int64_t needed = 1;
    for (std::size_t r = 0; r < requests.size(); ++r) {
      check_fits(options.capacity, static_cast<std::int64_t>(r), requests[r]);
      needed = std::max(needed, tokens_needed(requests[r]));
    }
    return options.capacity > 0 ? options.capacity : needed;
  }

 private:
  static std::int64_t tokens_needed(const SpeculativeRequest& request) {
    return static_cast<std::int64_t>(request.prompt.size()) +
           std::max<std::int64_t>(request.options.max_new_tokens, 1);
  }

  // A request's prompt and budget against `capacity` KV slots (0: no limit).
  static void check_fits(std::int64_t capacity, std::int64_t id,
                         const SpeculativeRequest& request) {
    SELFSPEC_CHECK(!request.prompt.empty(), "request {}: the prompt is empty", id);
    SELFSPEC_CHECK(request.options.max_new_tokens >= 0, "request {}: max_new_tokens {} < 0", id,
                   request.options.max_new_tokens);
    SELFSPEC_CHECK(capacity == 0 || tokens_needed(request) <= capacity,
                   "request {}: its prompt ({} tokens) and max_new_tokens ({}) exceed a "
                   "sequence's {} KV slots",
                   id, request.prompt.size(), request.options.max_new_tokens, capacity);
  }

  // The feed says, alike on every rank, which requests join; free slots take them in order.
  void admit() {
    if (!feed_open_) return;
    const auto room = static_cast<std::int64_t>(
        std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return !s->busy(); }));
    const bool idle = room == static_cast<std::int64_t>(slots_.size());
    if (room == 0) return;  // every rank knows: nothing could join
    std::optional<std::vector<FeedArrival>> arrivals = feed_.next(room, idle);
    if (!arrivals) {
      feed_open_ = false;
      return;
    }
    SELFSPEC_CHECK(static_cast<std::int64_t>(arrivals->size()) <= room,
                   "the request feed handed over {} requests for {} free slots", arrivals->size(),
                   room);
    auto slot = slots_.begin();
    for (const FeedArrival& arrival : *arrivals) {
      check_fits(capacity_, arrival.id, arrival.request);
      SELFSPEC_CHECK(!arrival.request.speculate || batch_.make_speculators_,
                     "request {} speculates but the batch was made without drafters", arrival.id);
      slot = std::find_if(slot, slots_.end(), [](const auto& s) { return !s->busy(); });
      (*slot)->start(
          arrival.id, arrival.request, batch_.options_.pass_tokens,
          arrival.request.speculate ? batch_.make_speculators_(arrival.id) : SequenceSpeculators{},
          model_, comm_, hooks_);
      fresh_.push_back(slot->get());
    }
  }

  // Every new sequence, and every sequence whose forward ran, runs on (slot order, every rank).
  void resume_ready() {
    if (sizer_) size_drafts();
    for (auto& slot : slots_) {
      if (!slot->busy()) continue;
      const bool fresh = std::find(fresh_.begin(), fresh_.end(), slot.get()) != fresh_.end();
      if (!fresh && !(slot->pending() && slot->pending()->done)) continue;
      if (!slot->resume()) continue;
      const std::int64_t request = slot->request();
      GenerationResult result = slot->finish();
      if (hooks_.on_done) hooks_.on_done(request, std::move(result));
    }
    fresh_.clear();
  }

  // Rank 0: caps the rounds the sequences plan next by the step's goodput.
  void size_drafts() {
    std::vector<SequenceSlot*> speculating;
    std::vector<DraftOutlook> outlooks;
    std::int64_t plain_rows = 0;
    for (auto& slot : slots_) {
      if (!slot->busy()) continue;
      if (slot->sizable()) {
        speculating.push_back(slot.get());
        outlooks.push_back(slot->outlook());
      } else {
        ++plain_rows;
      }
    }
    const std::vector<int> drafts = sizer_->size(outlooks, plain_rows);
    for (std::size_t i = 0; i < speculating.size(); ++i) {
      // A length at the controller's K is no cap: the request drafts as without sizing (lookups
      // may then propose more than K, which costs no draft forward).
      const bool capped = drafts[i] < outlooks[i].max_draft;
      speculating[i]->limit_draft(capped ? drafts[i] : kMaxDraftTokens);
    }
  }

  // The waiting forwards, by key in slot order, as passes of at most pass_tokens tokens.
  void run_passes() {
    std::vector<std::vector<SequenceSlot*>> groups;
    for (auto& slot : slots_) {
      if (!slot->waiting()) continue;
      auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& group) {
        return group.front()->pending()->key == slot->pending()->key;
      });
      if (same == groups.end()) {
        groups.push_back({slot.get()});
      } else {
        same->push_back(slot.get());
      }
    }
    // Drafts first: while some sequence is drafting, the sequences waiting for a full forward
    // (verification, prefill) wait too, so that a step's verifications share one pass instead of
    // running as the drafters happen to finish (the step goodput sizing prices: every draft pass,
    // then one verification pass).
    const bool drafting = std::any_of(groups.begin(), groups.end(), [](const auto& group) {
      return group.front()->pending()->key.drafts();
    });
    if (drafting) {
      std::erase_if(groups,
                    [](const auto& group) { return !group.front()->pending()->key.drafts(); });
    }
    pass_logits_.resize(slots_.size());
    std::size_t buffer = 0;
    for (const auto& group : groups) {
      std::vector<SequenceSlot*> pass;
      std::int64_t tokens = 0;
      for (SequenceSlot* slot : group) {
        const auto n = static_cast<std::int64_t>(slot->pending()->args.tokens.size());
        if (!pass.empty() && tokens + n > batch_.options_.pass_tokens) {
          run_pass(pass, pass_logits_[buffer++]);
          pass.clear();
          tokens = 0;
        }
        pass.push_back(slot);
        tokens += n;
      }
      run_pass(pass, pass_logits_[buffer++]);
    }
  }

  void run_pass(std::span<SequenceSlot* const> pass, std::vector<float>& logits) {
    const auto start = std::chrono::steady_clock::now();
    SpeculativeBatchStats& stats = batch_.stats_;
    if (pass.size() == 1) {
      // One sequence: its own forward, as a run without the batch would make it.
      PendingForward& only = *pass.front()->pending();
      only.result = model_.forward(only.args, *only.kv, *only.host_logits);
      only.done = true;
    } else {
      run_segmented(pass, logits);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool drafts = pass.front()->pending()->key.drafts();
    std::int64_t rows = 0;
    for (SequenceSlot* slot : pass) {
      rows += static_cast<std::int64_t>(slot->pending()->args.tokens.size());
    }
    if (sizer_) sizer_->record_pass(drafts, rows, seconds);
    ++stats.passes;
    if (drafts) ++stats.draft_passes;
    stats.tokens += rows;
    stats.max_sequences = std::max(stats.max_sequences, static_cast<std::int64_t>(pass.size()));
    stats.seconds += seconds;
  }

  // Several sequences' forwards as one, each over its own KV region.
  void run_segmented(std::span<SequenceSlot* const> pass, std::vector<float>& logits) {
    tokens_.clear();
    positions_.clear();
    rows_.clear();
    segments_.clear();
    members_.clear();
    for (SequenceSlot* slot : pass) {
      const ForwardArgs& args = slot->pending()->args;
      KvCache& region = *slot->pending()->kv;
      const auto n = static_cast<std::int64_t>(args.tokens.size());
      SELFSPEC_CHECK(region.length() + n <= region.capacity(),
                     "sequence {}: {} cached + {} new tokens exceed its {} KV slots", slot->index(),
                     region.length(), n, region.capacity());
      const auto first = static_cast<std::int64_t>(tokens_.size());
      members_.push_back({first, n, static_cast<std::int64_t>(rows_.size()),
                          static_cast<std::int64_t>(args.logit_rows.size()), args.observer,
                          args.observe_only});
      for (std::int32_t row : args.logit_rows) {
        rows_.push_back(static_cast<std::int32_t>(first + row));
      }
      tokens_.insert(tokens_.end(), args.tokens.begin(), args.tokens.end());
      positions_.insert(positions_.end(), args.positions.begin(), args.positions.end());
      const std::uint8_t* mask = args.mask != nullptr ? args.mask->data() : nullptr;
      segments_.push_back({first, n, region.first_slot_in(owner_), region.length(), mask});
    }
    ForwardArgs merged;
    merged.tokens = tokens_;
    merged.positions = positions_;
    merged.logit_rows = rows_;
    merged.draft = pass.front()->pending()->args.draft;
    merged.segments = segments_;
    const ForwardObserver observer = dispatching_observer();
    if (observer) {
      merged.observer = &observer;
      merged.observe_only = observe_only_;
    }
    const LogitRows all = model_.forward(merged, owner_, logits);
    for (std::size_t i = 0; i < pass.size(); ++i) {
      PendingForward& pending = *pass[i]->pending();
      pending.kv->extend(members_[i].tokens);
      pending.result = {all.data + members_[i].first_row * all.width, members_[i].rows, all.width,
                        all.device};
      pending.done = true;
    }
  }

  // A member's rows in a segmented pass, and what it observes.
  struct Member {
    std::int64_t first_token, tokens, first_row, rows;
    const ForwardObserver* observer;
    std::span<const std::string_view> observe_only;
  };

  // The pass's observer: each member's observer sees its own rows (its tokens, or its logit rows
  // for the final norm) of the intermediates it asked for. Empty when no member observes.
  ForwardObserver dispatching_observer() {
    observe_only_.clear();
    bool any = false, everything = false;
    for (const Member& m : members_) {
      if (m.observer == nullptr) continue;
      any = true;
      if (m.observe_only.empty()) everything = true;
      for (std::string_view name : m.observe_only) {
        if (std::find(observe_only_.begin(), observe_only_.end(), name) == observe_only_.end())
          observe_only_.push_back(name);
      }
    }
    if (!any) return {};
    if (everything) observe_only_.clear();
    return [this](std::string_view name, int layer, std::span<const float> data, std::int64_t n) {
      if (n == 0) return;
      const std::size_t width = data.size() / static_cast<std::size_t>(n);
      const bool logit_rows = name == "final_norm";
      for (const Member& m : members_) {
        if (m.observer == nullptr) continue;
        if (!m.observe_only.empty() &&
            std::find(m.observe_only.begin(), m.observe_only.end(), name) == m.observe_only.end())
          continue;
        const std::int64_t first = logit_rows ? m.first_row : m.first_token;
        const std::int64_t count = logit_rows ? m.rows : m.tokens;
        (*m.observer)(name, layer,
                      data.subspan(static_cast<std::size_t>(first) * width,
                                   static_cast<std::size_t>(count) * width),
                      count);
      }
    };
  }

  SpeculativeBatch& batch_;
  LlamaModel& model_;
  Communicator& comm_;
  RequestFeed& feed_;
  bool feed_open_ = true;
  const Hooks& hooks_;
  std::int64_t capacity_;
  KvCache owner_;
  std::vector<std::unique_ptr<SequenceSlot>> slots_;  // declared after owner_: regions of it
  std::vector<SequenceSlot*> fresh_;
  std::optional<GoodputSizer> sizer_;  // rank 0, with goodput sizing
  // The current pass's inputs; one logits buffer per pass of a step.
  std::vector<std::vector<float>> pass_logits_;
  std::vector<std::int32_t> tokens_, positions_, rows_;
  std::vector<KvSegment> segments_;
  std::vector<Member> members_;
  std::vector<std::string_view> observe_only_;
};

SpeculativeBatch::SpeculativeBatch(LlamaModel& model, Communicator& comm,
                                   SpeculativeBatchOptions options,
                                   MakeSpeculators make_speculators)
    : model_(model),
      comm_(comm),
      options_(options),
      make_speculators_(std::move(make_speculators)) {
  SELFSPEC_CHECK(options_.batch >= 1, "batched speculation: {} slots; it needs at least 1",
                 options_.batch);
  SELFSPEC_CHECK(options_.batch == 1 || model.backend().host_memory(),
                 "{} sequences at once run on host-memory backends (the CPU); use 1 on {}",
                 options_.batch, model.backend().description().summary());
  SELFSPEC_CHECK(options_.pass_tokens >= kMaxDraftTokens + 1,
                 "batched speculation: a pass of {} tokens cannot verify a draft of {}",
                 options_.pass_tokens, kMaxDraftTokens);
  SELFSPEC_CHECK(options_.capacity >= 0, "batched speculation: KV capacity {} < 0",
                 options_.capacity);
}

SpeculativeBatch::~SpeculativeBatch() = default;

namespace {

// run()'s feed: the requests of a list, request i as id i, as many as have arrived (rank 0's
// `arrived` hook, broadcast; all of them without it).
class ListFeed final : public RequestFeed {
 public:
  ListFeed(std::span<const SpeculativeRequest> requests, Communicator& comm,
           const std::function<std::int64_t(bool idle)>& arrived)
      : requests_(requests), comm_(comm), arrived_(arrived) {}

  std::optional<std::vector<FeedArrival>> next(std::int64_t room, bool idle) override {
    const auto total = static_cast<std::int64_t>(requests_.size());
    if (next_ == total) return std::nullopt;
    std::int64_t arrived = total;
    if (arrived_) {
      if (comm_.is_root()) arrived = std::clamp<std::int64_t>(arrived_(idle), 0, total);
      comm_.broadcast(std::as_writable_bytes(std::span(&arrived, 1)), 0);
    }
    std::vector<FeedArrival> arrivals;
    while (next_ < arrived && static_cast<std::int64_t>(arrivals.size()) < room) {
      arrivals.push_back({next_, requests_[static_cast<std::size_t>(next_)]});
      ++next_;
    }
    return arrivals;
  }

 private:
  std::span<const SpeculativeRequest> requests_;
  Communicator& comm_;
  const std::function<std::int64_t(bool idle)>& arrived_;
  std::int64_t next_ = 0;
};

}  // namespace

void SpeculativeBatch::run(std::span<const SpeculativeRequest> requests, const Hooks& hooks) {
  if (requests.empty()) return;
  const bool speculates = std::any_of(requests.begin(), requests.end(),
                                      [](const SpeculativeRequest& r) { return r.speculate; });
  SELFSPEC_CHECK(!speculates || make_speculators_,
                 "a request speculates but the batch was made without drafters");
  ListFeed feed(requests, comm_, hooks.arrived);
  Loop loop(*this, feed, Loop::capacity_for(options_, requests), hooks);
  loop.run();
}

void SpeculativeBatch::serve(RequestFeed& feed, const Hooks& hooks) {
  SELFSPEC_CHECK(options_.capacity > 0,
                 "serving needs a KV capacity per sequence (SpeculativeBatchOptions::capacity)");
  Loop loop(*this, feed, options_.capacity, hooks);
  loop.run();
}

}  // namespace selfspec
