#include "decode/decoding_run.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "model/kv_rows.hpp"
#include "verify/greedy_matches.hpp"

#include <nlohmann/json.hpp>

#include <array>

#include <algorithm>
#include <chrono>
#include <numeric>

namespace selfspec {
namespace {
constexpr int kMaxDraftPerRound = kMaxDraftTokens;  // the message holds the target's token too

// The accepted nodes the model drafted (a lookup branch's sourced nodes apart).
int model_accepted(const Draft& draft, const Verdict& verdict) {
  return static_cast<int>(std::count_if(verdict.accepted.begin(), verdict.accepted.end(),
                                        [&](int node) { return !draft.is_sourced(node); }));
}

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
                         KvCache& kv, const TokenCallback& on_token, ForwardPort* port)
    : model_(model),
      comm_(comm),
      drafter_(drafter),
      controller_(controller),
      options_(options),
      kv_(kv),
      port_(port),
      picker_(
          TokenPickerOptions{
              .mode = options.logits,
              .sampling = options.sampling,
              .max_alternatives = drafter != nullptr ? options.tree.max_width() - 1 : 0,
              .tp_invariant = model.reduction_order() == ReductionOrder::kTpInvariant,
              .point_mass_drafts = drafter != nullptr && drafter->point_mass_drafts()},
          comm, model.shard(),
          logits_stay_on_device(model)
              ? model.backend().make_shard_reductions(model.shard().vocab_shard())
              : nullptr),
      channel_(comm, options, on_token),
      timer_(model, picker_, channel_) {
  SELFSPEC_CHECK((drafter_ == nullptr) == (controller_ == nullptr),
                 "self-speculative decoding needs both a drafter and a draft-length controller");
  SELFSPEC_CHECK(options_.tree_max_nodes >= 1 && options_.tree_max_nodes <= kMaxDraftPerRound,
                 "a draft tree of at most {} nodes: choose 1 to {}", options_.tree_max_nodes,
                 kMaxDraftPerRound);
  round_.plan.layers = LayerPlan::full(static_cast<int>(model.config().num_layers));
  if (comm_.is_root() && controller_ != nullptr && controller_->uses_hidden_states()) {
    tap_ = std::make_unique<HiddenStateTap>(model.config().hidden_size);
  }
}

ForwardArgs DecodingRun::forward_args(std::span<const std::int32_t> tokens,
                                      std::span<const std::int32_t> positions,
                                      std::span<const std::int32_t> rows) {
  ForwardArgs args;
  args.tokens = tokens;
  args.positions = positions;
  args.logit_rows = rows;
  args.keep_logits_on_device = logits_stay_on_device(model_);
  if (tap_) {
    args.observer = tap_->next();
    args.observe_only = HiddenStateTap::names();
  }
  return args;
}

void DecodingRun::run_forward(const ForwardArgs& args) {
  forward_.logits = port_ != nullptr ? port_->forward(args, kv_, forward_.host_logits)
                                     : model_.forward(args, kv_, forward_.host_logits);
}

void DecodingRun::limit_draft(int limit) {
  SELFSPEC_CHECK(limit >= 0 && limit <= kMaxDraftTokens, "a draft limit of {} is outside [0, {}]",
                 limit, kMaxDraftTokens);
  draft_limit_ = limit;
}

// --- first token ---------------------------------------------------------------------------

void DecodingRun::first_token(std::span<const std::int32_t> prompt) {
  const auto start = std::chrono::steady_clock::now();
  prefill(prompt);
  result_.timings.prefill_tokens = static_cast<std::int64_t>(prompt.size());
  const std::int32_t first = picker_.next_token(forward_.logits);
  if (comm_.is_root()) close_step(channel_.emit(std::span(&first, 1)));
  channel_.broadcast_tokens(kv_);
  round_.root_token = channel_.message().tokens[0];
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
  log::Progress progress("prefill (tokens)", n);
  for (std::int64_t begin = 0; begin < n; begin += chunk) {
    const std::int64_t end = std::min(n, begin + chunk);
    forward_.positions.resize(static_cast<std::size_t>(end - begin));
    std::iota(forward_.positions.begin(), forward_.positions.end(),
              static_cast<std::int32_t>(kv_.length()));
    forward_.rows.assign(end == n ? 1 : 0, static_cast<std::int32_t>(end - begin - 1));
    const bool last = end == n;
    ForwardArgs args = forward_args(
        prompt.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)),
        forward_.positions, forward_.rows);
    if (!tap_ || !last) {
      args.observer = observer;
      args.observe_only = {};
    } else if (observer != nullptr) {
      // A controller that uses hidden states needs the root's (the last prompt row's final
      // norm); the drafter sees every intermediate beside it.
      args.observer = tap_->next_with(observer);
      args.observe_only = {};
    }
    run_forward(args);
    if (n > chunk) progress.update(end);
  }
  if (n > chunk) progress.finish();
  if (tap_) tap_->set_root(0);
}

// --- the round's plan ----------------------------------------------------------------------

void DecodingRun::close_step(bool ended) {
  if (channel_.end_step(ended)) {
    channel_.message().command = ControlCommand::kStop;
  } else {
    plan_next_round();
  }
}

void DecodingRun::plan_next_round() {
  ControlMessage& message = channel_.message();
  if (drafter_ == nullptr) {
    round_.cap = 0;
    message.command = ControlCommand::kVerify;
    return;
  }
  round_.cap = static_cast<int>(std::min<std::int64_t>(
      {controller_->max_draft(), channel_.remaining() - 1, kMaxDraftPerRound, draft_limit_}));
  controller_->begin_round();
  const DraftPlan plan = drafter_->next_plan();
  plan.layers.to_mask(message.skip_mask);
  message.exit_layer = plan.exit_layer;
  message.command = round_.cap >= 1 ? ControlCommand::kDraft : ControlCommand::kVerify;
}

void DecodingRun::adopt_plan() {
  const ControlMessage& message = channel_.message();
  round_.plan.exit_layer = message.exit_layer;
  std::array<std::uint64_t, LayerPlan::kMaskWords> current{};
  round_.plan.layers.to_mask(current);
  if (current == message.skip_mask) return;
  round_.plan.layers = LayerPlan::from_mask(round_.plan.layers.num_layers(), message.skip_mask);
}

// --- draft -----------------------------------------------------------------------------------

const Draft& DecodingRun::draft() {
  round_.base = kv_.length();
  round_.draft.clear();
  picker_.begin_round();
  if (channel_.message().command == ControlCommand::kDraft) {
    drafter_->propose(*this, round_.draft);
  }
  return round_.draft;
}

void DecodingRun::share(std::span<std::byte> data) {
  comm_.broadcast(data, 0);
}

void DecodingRun::history(std::vector<std::int32_t>& out) const {
  out.assign(prompt_.begin(), prompt_.end());
  out.insert(out.end(), channel_.tokens().begin(), channel_.tokens().end());
}

int DecodingRun::draft_room() const {
  // The tokens still to generate and the KV cache bound it, not the draft-length controller's
  // K (which prices draft forwards; a lookup costs none).
  if (!comm_.is_root()) return 0;
  return static_cast<int>(std::min<std::int64_t>(
      {channel_.remaining() - 1, kMaxDraftPerRound, node_budget(), draft_limit_}));
}

int DecodingRun::node_room() const {
  // Every node is a row of the verification forward, written into the KV cache after the root.
  if (!comm_.is_root()) return 0;
  return static_cast<int>(std::min<std::int64_t>(
      {kMaxDraftPerRound, node_budget(), kv_.capacity() - round_.base - 1, draft_limit_}));
}

DraftMatch DecodingRun::score_plan(const LayerPlan& candidate, int window) {
  // The committed sequence is prompt + emitted tokens; all but the last (the root) are in the KV.
  const std::vector<std::int32_t>& output = channel_.tokens();
  const std::int64_t length = kv_.length();
  const std::int64_t w = std::min<std::int64_t>(window, generated());
  if (w < 1) return {};
  SELFSPEC_CHECK(length + 1 == static_cast<std::int64_t>(prompt_.size()) + generated(),
                 "score_plan between rounds only: the KV holds {} tokens, the run has {}", length,
                 prompt_.size() + output.size());
  const auto start = std::chrono::steady_clock::now();
  // The last w + 1 committed tokens: the last w are the targets, each after its input. w never
  // exceeds the output, so at most the prompt's last token is among them.
  const std::size_t from_output = std::min(output.size(), static_cast<std::size_t>(w + 1));
  std::vector<std::int32_t> tail(prompt_.end() - static_cast<std::ptrdiff_t>(w + 1 - from_output),
                                 prompt_.end());
  tail.insert(tail.end(), output.end() - static_cast<std::ptrdiff_t>(from_output), output.end());
  const std::span<const std::int32_t> window_tokens(tail);
  const KvRows saved = save_kv_rows(model_.backend(), kv_, length - w, w);
  if (!score_reader_) {
    score_reader_ = make_sharded_logits(LogitsMode::kLocal, comm_, model_.shard());
  }
  const DraftMatch match =
      count_greedy_matches(model_, kv_, *score_reader_, candidate, nullptr, window_tokens.first(w),
                           window_tokens.last(w), length - w, forward_.host_logits);
  restore_kv_rows(model_.backend(), kv_, saved);
  result_.stats.score_forwards += 1;
  result_.stats.score_forward_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return match;
}

DraftStep DecodingRun::step(const Draft& draft, int parent) {
  ControlMessage& message = channel_.message();
  SELFSPEC_CHECK(message.command == ControlCommand::kDraft,
                 "a draft step after rank 0 ended drafting");
  const std::int32_t token = parent == Draft::kRoot ? round_.root_token : draft.token(parent);
  const auto position = static_cast<std::int32_t>(round_.base + draft.depth(parent));
  const std::int32_t row = 0;
  ForwardArgs args = forward_args({&token, 1}, {&position, 1}, {&row, 1});
  args.draft = options_.draft;  // the run's weights and vocabulary, with the round's plan
  args.draft.plan = &round_.plan.layers;
  args.draft.early_exit = round_.plan.exits_early();
  timer_.forward(PhaseTimer::Forward::kDraft, [&] { run_forward(args); });
  ++result_.stats.draft_forwards;
  return pick_step(draft);
}

DraftStep DecodingRun::step_rows(const Draft& draft, int parent, const DraftRows& rows) {
  SELFSPEC_CHECK(channel_.message().command == ControlCommand::kDraft,
                 "a draft step after rank 0 ended drafting");
  SELFSPEC_CHECK(parent == Draft::kRoot || (parent >= 0 && parent < draft.size()),
                 "a feature draft step from node {} of a draft of {}", parent, draft.size());
  const auto n = static_cast<std::int64_t>(rows.tokens.size());
  const std::int64_t hidden = model_.config().hidden_size;
  SELFSPEC_CHECK(n >= 1 && rows.positions.size() == rows.tokens.size() &&
                     rows.features.rows.size() == static_cast<std::size_t>(n * hidden),
                 "a feature draft step of {} tokens with {} positions and {} feature values", n,
                 rows.positions.size(), rows.features.rows.size());
  const std::int64_t chunk = std::max<std::int64_t>(options_.prefill_chunk, 1);
  for (std::int64_t begin = 0; begin < n; begin += chunk) {
    const std::int64_t end = std::min(n, begin + chunk);
    const auto count = static_cast<std::size_t>(end - begin);
    const auto row = static_cast<std::int32_t>(count - 1);
    const FeatureRows features{
        rows.features.rows.subspan(static_cast<std::size_t>(begin * hidden), count * hidden),
        rows.features.first_slot + begin};
    ForwardArgs args =
        forward_args(rows.tokens.subspan(static_cast<std::size_t>(begin), count),
                     rows.positions.subspan(static_cast<std::size_t>(begin), count),
                     end == n ? std::span(&row, 1) : std::span<const std::int32_t>());
    args.draft.draft_weights = options_.draft.draft_weights;
    args.draft.vocabulary = options_.draft.vocabulary;
    args.draft.features = &features;
    add_observer(args, rows.observer);
    timer_.forward(PhaseTimer::Forward::kDraft, [&] { run_forward(args); });
    ++result_.stats.draft_forwards;
  }
  return pick_step(draft);
}

void DecodingRun::add_observer(ForwardArgs& args, const ForwardObserver* observer) {
  // Only the rows the drafter and the tap read reach the host (on a device backend nothing else
  // is downloaded).
  static constexpr std::array<std::string_view, 1> kFinalResidual = {"final_residual"};
  static constexpr std::array<std::string_view, 2> kWithTap = {"final_residual", "final_norm"};
  if (observer == nullptr) return;
  if (tap_) {
    args.observer = tap_->next_with(observer);
    args.observe_only = kWithTap;
    return;
  }
  args.observer = observer;
  args.observe_only = kFinalResidual;
}

DraftStep DecodingRun::pick_step(const Draft& draft) {
  ControlMessage& message = channel_.message();
  DraftChoice choice;
  timer_.control([&] {
    choice = picker_.draft(forward_.logits);
    if (!comm_.is_root()) return;
    const int alternatives = alternatives_for(draft, choice);
    const int nodes = draft.size() + 1 + alternatives;
    const int drafted = draft.drawn() + 1;
    if (tap_) controller_->observe_hidden(drafted, tap_->root(), tap_->row(0));
    const bool more = drafted < round_.cap && nodes < node_budget() &&
                      controller_->continue_drafting(drafted, choice.confidence);
    message.command = more ? ControlCommand::kDraft : ControlCommand::kVerify;
    message.tokens[0] = choice.token;
    std::copy_n(choice.alternatives.begin(), alternatives, message.tokens.begin() + 1);
    message.n_tokens = static_cast<std::uint32_t>(1 + alternatives);
    message.accepted = 0;
  });
  channel_.broadcast(kv_);
  DraftStep result{
      message.tokens[0], choice.confidence, message.command == ControlCommand::kDraft, {}};
  result.alternatives.assign(message.tokens.begin() + 1, message.tokens.begin() + message.n_tokens);
  return result;
}

int DecodingRun::node_budget() const {
  // A chain is bounded by the round's cap alone (which leaves room in the KV cache); a tree's
  // verification forward writes the root and every node into the cache.
  if (options_.tree.is_chain()) return kMaxDraftPerRound;
  return static_cast<int>(
      std::min<std::int64_t>(options_.tree_max_nodes, kv_.capacity() - round_.base - 1));
}

int DecodingRun::alternatives_for(const Draft& draft, const DraftChoice& choice) const {
  const int room = node_budget() - draft.size() - 1;
  const int wanted = options_.tree.width(choice.confidence) - 1;
  return std::max(0, std::min({wanted, room, static_cast<int>(choice.alternatives.size())}));
}

// --- verify ----------------------------------------------------------------------------------

Verdict DecodingRun::verify(const Draft& draft) {
  // One full forward over [root, draft nodes], overwriting whatever the draft forwards wrote. A
  // node sits at the position after its parent; a tree's nodes see only their ancestors.
  kv_.truncate(round_.base);
  const auto n = static_cast<std::size_t>(draft.size() + 1);
  forward_.tokens.assign(1, round_.root_token);
  forward_.tokens.insert(forward_.tokens.end(), draft.tokens().begin(), draft.tokens().end());
  forward_.positions.resize(n);
  forward_.positions[0] = static_cast<std::int32_t>(round_.base);
  for (int node = 0; node < draft.size(); ++node) {
    forward_.positions[static_cast<std::size_t>(node + 1)] =
        forward_.positions[static_cast<std::size_t>(draft.parent(node) + 1)] + 1;
  }
  forward_.rows.resize(n);
  std::iota(forward_.rows.begin(), forward_.rows.end(), 0);
  const bool tree = !draft.is_chain();
  const AttentionMask mask = tree ? draft.tree_mask() : AttentionMask::causal();
  ForwardArgs args = forward_args(forward_.tokens, forward_.positions, forward_.rows);
  if (tree) args.mask = &mask;
  if (drafter_ != nullptr) add_observer(args, drafter_->verification_observer());
  timer_.forward(PhaseTimer::Forward::kVerify, [&] { run_forward(args); });
  ++result_.stats.verify_forwards;

  Verdict verdict;
  timer_.control([&] {
    verdict = picker_.verify(forward_.logits, draft);
    if (!comm_.is_root()) return;
    // The next root's logits came from the last accepted node's row (node k is row k + 1).
    if (tap_) tap_->set_root(verdict.accepted.empty() ? 0 : verdict.accepted.back() + 1);
    decide_round(draft, verdict);
  });
  channel_.broadcast_tokens(kv_);
  const ControlMessage& message = channel_.message();
  if (!comm_.is_root()) verdict = verdict_from_message(draft);
  verdict.kv_length = round_.base + 1 + static_cast<std::int64_t>(message.accepted);
  if (drafter_ != nullptr) drafter_->verified(draft, verdict);

  DecodingStats& stats = result_.stats;
  ++stats.rounds;
  stats.drafted += draft.drawn() + draft.sourced();
  stats.alternatives += draft.size() - draft.drawn() - draft.sourced();
  for (const int node : verdict.accepted) stats.alternatives_accepted += draft.is_alternative(node);
  stats.accepted += verdict.accepted_count();
  stats.round_tokens += message.n_tokens;
  return verdict;
}

void DecodingRun::decide_round(const Draft& draft, const Verdict& verdict) {
  std::vector<std::int32_t> tokens;
  for (int node : verdict.accepted) tokens.push_back(draft.token(node));
  tokens.push_back(verdict.next_token);
  const bool ended = channel_.emit(tokens);
  channel_.message().accepted = static_cast<std::uint32_t>(verdict.accepted_count());
  if (!draft.empty()) {
    // The controller prices the model's draft steps: a lookup's nodes are not its own.
    if (!draft.from_lookup()) controller_->update(draft.drawn(), model_accepted(draft, verdict));
    drafter_->observe(draft, verdict);
  }
  report_round(draft, verdict);
  close_step(ended);
}

Verdict DecodingRun::verdict_from_message(const Draft& draft) const {
  const ControlMessage& message = channel_.message();
  Verdict verdict;
  const auto accepted = static_cast<int>(message.accepted);
  // The accepted tokens travel first and spell the accepted path (siblings differ). When
  // generation stopped inside the path, only the emitted part is known; the run is over then.
  const int known = std::min(accepted, static_cast<int>(message.n_tokens));
  verdict.accepted =
      draft.path_of(std::span(message.tokens).first(static_cast<std::size_t>(known)));
  // The target's token travels last, unless generation stopped inside the accepted path.
  if (static_cast<int>(message.n_tokens) == accepted + 1) {
    verdict.next_token = message.tokens[static_cast<std::size_t>(accepted)];
  }
  return verdict;
}

void DecodingRun::report_round(const Draft& draft, const Verdict& verdict) {
  if (!options_.on_round) return;
  options_.on_round({result_.stats.rounds, draft, verdict,
                     static_cast<int>(channel_.message().n_tokens),
                     controller_ != nullptr ? controller_->state() : nlohmann::json(nullptr),
                     round_.plan.layers.describe()});
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
      rows.push_back(static_cast<std::int32_t>(round_.base + 1 + node));
    }
    kv_.keep_rows(model_.backend(), round_.base + 1, rows);
  }
  kv_.truncate(verdict.kv_length);  // rollback is a length change
  round_.root_token = verdict.next_token;
  adopt_plan();
}

// --- the result ------------------------------------------------------------------------------

GenerationResult DecodingRun::finish() {
  const ControlMessage& message = channel_.message();
  result_.tokens = channel_.take_tokens();
  result_.stopped_on_eos = (message.flags & kFlagEos) != 0;
  result_.interrupt_signal = interrupt_signal_of(message.flags);
  GenerationTimings& timings = result_.timings;
  timings.decode_seconds = result_.stats.rounds > 0 ? timer_.rounds_seconds() : 0.0;
  timings.decode_forwards = result_.stats.round_tokens;
  timings.comm_seconds = timer_.run_comm_seconds();
  timer_.finish(result_.stats);
  return std::move(result_);
}

}  // namespace selfspec
