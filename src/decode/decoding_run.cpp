#include "decode/decoding_run.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "verify/greedy_matches.hpp"
#include "model/kv_rows.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <numeric>

namespace selfspec {
namespace {
// What a controller that uses hidden states (Cali-TS) observes: the final norm's rows only, so a
// device backend copies nothing else to the host.
constexpr std::array<std::string_view, 1> kFinalNormOnly = {"final_norm"};

constexpr int kMaxDraftPerRound = ControlMessage::kMaxTokens - 1;  // + the target's own token

}  // namespace

bool logits_stay_on_device(const LlamaModel& model) {
  return !model.backend().host_memory();
}

std::string_view verification_path(const LlamaModel& model, LogitsMode mode) {
  if (!logits_stay_on_device(model)) return "host";
  const bool local =
      mode == LogitsMode::kLocal && model.reduction_order() != ReductionOrder::kTpInvariant;
  return local ? "device" : "device-gather";
}

DecodingRun::DecodingRun(LlamaModel& model, Communicator& comm, Drafter* drafter,
                         DraftLengthController* controller, const GenerationOptions& options,
                         KvCache& kv, const TokenCallback& on_token)
    : model_(model),
      comm_(comm),
      drafter_(drafter),
      controller_(controller),
      options_(options),
      kv_(kv),
      picker_(options.logits, comm, model.shard(), options.sampling,
              drafter != nullptr ? options.tree.max_width() - 1 : 0,
              model.reduction_order() == ReductionOrder::kTpInvariant,
              logits_stay_on_device(model) ? make_shard_reductions(model.backend(), model.shard())
                                           : nullptr),
      channel_(comm, options, on_token, result_.tokens),
      timer_(model, picker_, channel_),
      model_comm_at_start_(model.counters().comm_seconds),
      plan_(LayerPlan::full(static_cast<int>(model.config().num_layers))),
      device_verification_(logits_stay_on_device(model)) {
  SELFSPEC_CHECK((drafter_ == nullptr) == (controller_ == nullptr),
                 "self-speculative decoding needs both a drafter and a draft-length controller");
  SELFSPEC_CHECK(options_.tree_max_nodes >= 1 && options_.tree_max_nodes <= kMaxDraftPerRound,
                 "a draft tree of at most {} nodes: choose 1 to {}", options_.tree_max_nodes,
                 kMaxDraftPerRound);
  if (comm_.is_root() && controller_ != nullptr && controller_->uses_hidden_states()) {
    keep_hidden_ = [this](std::string_view name, int /*layer*/, std::span<const float> data,
                          std::int64_t /*rows*/) {
      if (name == "final_norm") hidden_rows_.assign(data.begin(), data.end());
    };
  }
  if (comm_.is_root() && !options_.trace.empty()) {
    trace_.open(options_.trace, std::ios::trunc);
    SELFSPEC_CHECK(trace_.good(), "--trace {}: cannot open for writing", options_.trace.string());
  }
}

LogitRows DecodingRun::picker_rows() const {
  if (!device_verification_) return LogitRows::host(logits_, model_.shard().vocab.size());
  const ResidentLogits& resident = model_.resident_logits();
  return {resident.data, resident.rows, resident.width, true};
}

// --- first token ---------------------------------------------------------------------------

void DecodingRun::first_token(std::span<const std::int32_t> prompt) {
  const auto start = std::chrono::steady_clock::now();
  prefill(prompt);
  result_.timings.prefill_tokens = static_cast<std::int64_t>(prompt.size());
  const std::int32_t first = picker_.next_token(picker_rows());
  if (comm_.is_root()) {
    close_step(channel_.emit(std::span(&first, 1), message_));
  }
  channel_.broadcast_tokens(message_, kv_);
  root_token_ = message_.tokens[0];
  adopt_plan();
  result_.timings.prefill_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  timer_.start_rounds();
}

void DecodingRun::prefill(std::span<const std::int32_t> prompt) {
  prompt_.assign(prompt.begin(), prompt.end());
  const auto n = static_cast<std::int64_t>(prompt.size());
  const std::int64_t chunk = std::max<std::int64_t>(options_.prefill_chunk, 1);
  // The drafter may watch the prompt go in (every rank, every chunk): Drafter::begin_request.
  const ForwardObserver* observer = drafter_ != nullptr ? drafter_->begin_request(n) : nullptr;
  // A controller that uses hidden states needs the root's: the last prompt row's final norm.
  ForwardObserver both;
  if (keep_hidden_) {
    both = [&](std::string_view name, int layer, std::span<const float> data, std::int64_t rows) {
      if (observer != nullptr && *observer) (*observer)(name, layer, data, rows);
      keep_hidden_(name, layer, data, rows);
    };
  }
  log::Progress progress("prefill (tokens)", n);
  for (std::int64_t begin = 0; begin < n; begin += chunk) {
    const std::int64_t end = std::min(n, begin + chunk);
    forward_positions_.resize(static_cast<std::size_t>(end - begin));
    std::iota(forward_positions_.begin(), forward_positions_.end(),
              static_cast<std::int32_t>(kv_.length()));
    const auto last_row = static_cast<std::int32_t>(end - begin - 1);
    ForwardArgs args;
    args.tokens =
        prompt.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
    args.positions = forward_positions_;
    if (end == n) args.logit_rows = {&last_row, 1};
    args.observer = keep_hidden_ && end == n ? &both : observer;
    // The controller alone watches: the final norm is all it needs.
    if (keep_hidden_ && end == n && observer == nullptr) args.observe_only = kFinalNormOnly;
    args.keep_logits_on_device = device_verification_;
    model_.forward(args, kv_, logits_);
    if (n > chunk) progress.update(end);
  }
  if (n > chunk) progress.finish();
  if (keep_hidden_) root_hidden_ = hidden_rows_;
}

// --- the round's plan ----------------------------------------------------------------------

void DecodingRun::close_step(bool ended) {
  if (channel_.end_step(message_, ended)) {
    message_.command = ControlCommand::kStop;
  } else {
    plan_next_round();
  }
}

void DecodingRun::plan_next_round() {
  if (drafter_ == nullptr) {
    cap_ = 0;
    message_.command = ControlCommand::kVerify;
    return;
  }
  cap_ = static_cast<int>(std::min<std::int64_t>(
      {controller_->max_draft(), channel_.remaining() - 1, kMaxDraftPerRound}));
  controller_->begin_round();
  drafter_->next_plan().to_mask(message_.skip_mask);
  message_.exit_layer = drafter_->exit_layer();
  message_.command = cap_ >= 1 ? ControlCommand::kDraft : ControlCommand::kVerify;
}

void DecodingRun::adopt_plan() {
  early_exit_ = message_.exit_layer >= 0;
  if (std::equal(plan_mask_.begin(), plan_mask_.end(), message_.skip_mask.begin())) return;
  std::copy(message_.skip_mask.begin(), message_.skip_mask.end(), plan_mask_.begin());
  plan_ = LayerPlan::from_mask(plan_.num_layers(), plan_mask_);
}

// --- draft -----------------------------------------------------------------------------------

const Draft& DecodingRun::draft() {
  base_ = kv_.length();
  draft_.clear();
  picker_.begin_round();
  if (message_.command == ControlCommand::kDraft) drafter_->propose(*this, draft_);
  return draft_;
}

void DecodingRun::share(std::span<std::byte> data) {
  comm_.broadcast(data, 0);
}

DraftMatch DecodingRun::score_plan(const LayerPlan& candidate, int window) {
  // The committed sequence is prompt + emitted tokens; all but the last (the root) are in the KV.
  const std::int64_t length = kv_.length();
  const std::int64_t w = std::min<std::int64_t>(window, generated());
  if (w < 1) return {};
  SELFSPEC_CHECK(length + 1 == static_cast<std::int64_t>(prompt_.size()) + generated(),
                 "score_plan between rounds only: the KV holds {} tokens, the run has {}", length,
                 prompt_.size() + result_.tokens.size());
  const auto start = std::chrono::steady_clock::now();
  // The last w + 1 committed tokens: the last w are the targets, each after its input. w never
  // exceeds the output, so at most the prompt's last token is among them.
  const std::size_t from_output = std::min(result_.tokens.size(), static_cast<std::size_t>(w + 1));
  std::vector<std::int32_t> tail(prompt_.end() - static_cast<std::ptrdiff_t>(w + 1 - from_output),
                                 prompt_.end());
  tail.insert(tail.end(), result_.tokens.end() - static_cast<std::ptrdiff_t>(from_output),
              result_.tokens.end());
  const std::span<const std::int32_t> window_tokens(tail);
  const KvRows saved = save_kv_rows(model_.backend(), kv_, length - w, w);
  if (!score_reader_) {
    score_reader_ = make_sharded_logits(LogitsMode::kLocal, comm_, model_.shard());
  }
  const DraftMatch match =
      count_greedy_matches(model_, kv_, *score_reader_, candidate, nullptr, window_tokens.first(w),
                           window_tokens.last(w), length - w, logits_);
  restore_kv_rows(model_.backend(), kv_, saved);
  result_.stats.score_forwards += 1;
  result_.stats.score_forward_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return match;
}

DraftStep DecodingRun::step(const Draft& draft, int parent) {
  SELFSPEC_CHECK(message_.command == ControlCommand::kDraft,
                 "a draft step after rank 0 ended drafting");
  const std::int32_t token = parent == Draft::kRoot ? root_token_ : draft.token(parent);
  const auto position = static_cast<std::int32_t>(base_ + draft.depth(parent));
  const std::int32_t row = 0;
  ForwardArgs args;
  args.tokens = {&token, 1};
  args.positions = {&position, 1};
  args.plan = &plan_;
  args.logit_rows = {&row, 1};
  args.draft_vocabulary = options_.draft_vocabulary;
  args.early_exit = early_exit_;
  args.observer = hidden_observer();
  if (args.observer != nullptr) args.observe_only = kFinalNormOnly;
  args.keep_logits_on_device = device_verification_;
  timer_.forward(PhaseTimer::Forward::kDraft, [&] { model_.forward(args, kv_, logits_); });
  ++result_.stats.draft_forwards;

  DraftChoice choice;
  timer_.control([&] {
    choice = picker_.draft(picker_rows());
    if (!comm_.is_root()) return;
    const int alternatives = alternatives_for(draft, choice);
    const int nodes = draft.size() + 1 + alternatives;
    const int drafted = draft.drawn() + 1;
    if (keep_hidden_) controller_->observe_hidden(drafted, root_hidden_, hidden_row(0));
    const bool more = drafted < cap_ && nodes < node_budget() &&
                      controller_->continue_drafting(drafted, choice.confidence);
    message_.command = more ? ControlCommand::kDraft : ControlCommand::kVerify;
    message_.tokens[0] = choice.token;
    std::copy_n(choice.alternatives.begin(), alternatives, message_.tokens.begin() + 1);
    message_.n_tokens = static_cast<std::uint32_t>(1 + alternatives);
    message_.accepted = 0;
  });
  channel_.broadcast(message_, kv_);
  DraftStep result{
      message_.tokens[0], choice.confidence, message_.command == ControlCommand::kDraft, {}};
  result.alternatives.assign(message_.tokens.begin() + 1,
                             message_.tokens.begin() + message_.n_tokens);
  return result;
}

int DecodingRun::node_budget() const {
  // A chain is bounded by the round's cap alone (which leaves room in the KV cache); a tree's
  // verification forward writes the root and every node into the cache.
  if (options_.tree.is_chain()) return kMaxDraftPerRound;
  return static_cast<int>(
      std::min<std::int64_t>(options_.tree_max_nodes, kv_.capacity() - base_ - 1));
}

int DecodingRun::alternatives_for(const Draft& draft, const DraftChoice& choice) const {
  const int room = node_budget() - draft.size() - 1;
  const int wanted = options_.tree.width(choice.confidence) - 1;
  return std::max(0, std::min({wanted, room, static_cast<int>(choice.alternatives.size())}));
}

const ForwardObserver* DecodingRun::hidden_observer() {
  if (!keep_hidden_) return nullptr;
  hidden_rows_.clear();  // a forward that observes nothing leaves no stale rows to be read
  return &keep_hidden_;
}

std::span<const float> DecodingRun::hidden_row(std::int64_t row) const {
  const auto d = static_cast<std::size_t>(model_.config().hidden_size);
  const auto at = static_cast<std::size_t>(row) * d;
  SELFSPEC_CHECK(at + d <= hidden_rows_.size(),
                 "final hidden state of row {} wanted, {} rows observed", row,
                 hidden_rows_.size() / d);
  return std::span<const float>(hidden_rows_).subspan(at, d);
}

// --- verify ----------------------------------------------------------------------------------

Verdict DecodingRun::verify(const Draft& draft) {
  // One full forward over [root, draft nodes], overwriting whatever the draft forwards wrote. A
  // node sits at the position after its parent; a tree's nodes see only their ancestors.
  kv_.truncate(base_);
  const auto n = static_cast<std::size_t>(draft.size() + 1);
  forward_tokens_.assign(1, root_token_);
  forward_tokens_.insert(forward_tokens_.end(), draft.tokens().begin(), draft.tokens().end());
  forward_positions_.resize(n);
  forward_positions_[0] = static_cast<std::int32_t>(base_);
  for (int node = 0; node < draft.size(); ++node) {
    forward_positions_[static_cast<std::size_t>(node + 1)] =
        forward_positions_[static_cast<std::size_t>(draft.parent(node) + 1)] + 1;
  }
  forward_rows_.resize(n);
  std::iota(forward_rows_.begin(), forward_rows_.end(), 0);
  const bool tree = !draft.is_chain();
  const AttentionMask mask = tree ? draft.tree_mask() : AttentionMask::causal();
  ForwardArgs args;
  args.tokens = forward_tokens_;
  args.positions = forward_positions_;
  args.logit_rows = forward_rows_;
  if (tree) args.mask = &mask;
  args.observer = hidden_observer();
  if (args.observer != nullptr) args.observe_only = kFinalNormOnly;
  args.keep_logits_on_device = device_verification_;
  timer_.forward(PhaseTimer::Forward::kVerify, [&] { model_.forward(args, kv_, logits_); });
  ++result_.stats.verify_forwards;

  Verdict verdict;
  timer_.control([&] {
    verdict = picker_.verify(picker_rows(), draft);
    if (!comm_.is_root()) return;
    if (keep_hidden_) {
      // The next root's logits came from the last accepted node's row (node k is row k + 1).
      const int row = verdict.accepted.empty() ? 0 : verdict.accepted.back() + 1;
      const std::span<const float> root = hidden_row(row);
      root_hidden_.assign(root.begin(), root.end());
    }
    decide_round(draft, verdict);
  });
  channel_.broadcast_tokens(message_, kv_);
  if (!comm_.is_root()) verdict = verdict_from_message(draft);
  verdict.kv_length = base_ + 1 + static_cast<std::int64_t>(message_.accepted);

  DecodingStats& stats = result_.stats;
  ++stats.rounds;
  stats.drafted += draft.drawn();
  stats.alternatives += draft.size() - draft.drawn();
  for (const int node : verdict.accepted) stats.alternatives_accepted += draft.is_alternative(node);
  stats.accepted += verdict.accepted_count();
  stats.round_tokens += message_.n_tokens;
  return verdict;
}

void DecodingRun::decide_round(const Draft& draft, const Verdict& verdict) {
  std::vector<std::int32_t> tokens;
  for (int node : verdict.accepted) tokens.push_back(draft.token(node));
  tokens.push_back(verdict.next_token);
  const bool ended = channel_.emit(tokens, message_);
  message_.accepted = static_cast<std::uint32_t>(verdict.accepted_count());
  if (!draft.empty()) {
    controller_->update(draft.drawn(), verdict.accepted_count());
    drafter_->observe(draft, verdict);
  }
  trace_round(draft, verdict);
  close_step(ended);
}

Verdict DecodingRun::verdict_from_message(const Draft& draft) const {
  Verdict verdict;
  const auto accepted = static_cast<int>(message_.accepted);
  // The accepted tokens travel first and spell the accepted path (siblings differ). When
  // generation stopped inside the path, only the emitted part is known; the run is over then.
  const int known = std::min(accepted, static_cast<int>(message_.n_tokens));
  verdict.accepted =
      draft.path_of(std::span(message_.tokens).first(static_cast<std::size_t>(known)));
  // The target's token travels last, unless generation stopped inside the accepted path.
  if (static_cast<int>(message_.n_tokens) == accepted + 1) {
    verdict.next_token = message_.tokens[static_cast<std::size_t>(accepted)];
  }
  return verdict;
}

void DecodingRun::trace_round(const Draft& draft, const Verdict& verdict) {
  if (!trace_.is_open()) return;
  const nlohmann::json record = {
      {"round", result_.stats.rounds},
      {"drafted", draft.size()},
      {"accepted", verdict.accepted_count()},
      {"emitted", message_.n_tokens},
      {"draft_tokens", std::vector<std::int32_t>(draft.tokens().begin(), draft.tokens().end())},
      {"parents", std::vector<int>(draft.parents().begin(), draft.parents().end())},
      {"accepted_nodes", verdict.accepted},
      {"confidences", std::vector<double>(draft.confidences().begin(), draft.confidences().end())},
      {"next_token", verdict.next_token},
      {"controller", controller_ != nullptr ? controller_->state() : nlohmann::json(nullptr)},
      {"plan", plan_.describe()}};
  trace_ << record.dump() << "\n";
}

// --- commit ----------------------------------------------------------------------------------

void DecodingRun::commit(const Verdict& verdict) {
  if (finished()) {
    kv_.truncate(verdict.kv_length);
    return;
  }
  if (!Draft::is_prefix(verdict.accepted)) {
    // A tree's accepted path: move its nodes' rows (row 1 + node) next to the root's.
    std::vector<std::int32_t> rows;
    for (const int node : verdict.accepted) {
      rows.push_back(static_cast<std::int32_t>(base_ + 1 + node));
    }
    kv_.keep_rows(model_.backend(), base_ + 1, rows);
  }
  kv_.truncate(verdict.kv_length);  // rollback is a length change
  root_token_ = verdict.next_token;
  adopt_plan();
}

// --- the result ------------------------------------------------------------------------------

GenerationResult DecodingRun::finish() {
  if (trace_.is_open()) trace_.flush();
  result_.stopped_on_eos = (message_.flags & kFlagEos) != 0;
  result_.interrupt_signal = interrupt_signal_of(message_.flags);
  GenerationTimings& timings = result_.timings;
  timings.decode_seconds = result_.stats.rounds > 0 ? timer_.rounds_seconds() : 0.0;
  timings.decode_forwards = result_.stats.round_tokens;
  timings.comm_seconds = (model_.counters().comm_seconds - model_comm_at_start_) +
                         picker_.comm_seconds() + channel_.comm_seconds();
  timer_.finish(result_.stats);
  return std::move(result_);
}

}  // namespace selfspec
