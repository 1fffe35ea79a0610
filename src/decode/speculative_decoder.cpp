#include "decode/speculative_decoder.hpp"

#include "core/error.hpp"
#include "decode/control_message.hpp"
#include "decode/verifier.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <numeric>

namespace selfspec {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr int kMaxDraftPerRound = ControlMessage::kMaxTokens - 1;  // + the target's own token

std::uint64_t mix(std::uint64_t hash, std::uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  return hash;
}

// The loop's per-run state and the rank-0 bookkeeping around it.
class Round {
 public:
  Round(LlamaModel& model, Communicator& comm, Drafter& drafter, DraftLengthController& controller,
        const SpeculativeOptions& options, const TokenCallback& on_token, SpeculativeResult& result)
      : model_(model),
        comm_(comm),
        drafter_(drafter),
        controller_(controller),
        options_(options),
        on_token_(on_token),
        result_(result) {
    if (comm_.is_root() && !options_.trace.empty()) {
      trace_.open(options_.trace, std::ios::trunc);
      SELFSPEC_CHECK(trace_.good(), "--trace {}: cannot open for writing", options_.trace.string());
    }
  }

  // Rank 0: appends a generated token; true when generation must stop after it.
  bool emit(std::int32_t token) {
    result_.tokens.push_back(token);
    if (on_token_) on_token_(token);
    const auto& eos = options_.generation.eos_ids;
    if (!options_.generation.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) {
      result_.stopped_on_eos = true;
      return true;
    }
    return static_cast<std::int64_t>(result_.tokens.size()) >= options_.generation.max_new_tokens;
  }

  // Rank 0, when a round ends without finishing: the signal of a stop request, else 0.
  int interrupt() const {
    return options_.generation.interrupt ? options_.generation.interrupt() : 0;
  }

  // Rank 0: sets up the next round in `message` (command, skip mask) and returns its draft cap.
  int plan_next_round(ControlMessage& message) {
    const std::int64_t remaining =
        options_.generation.max_new_tokens - static_cast<std::int64_t>(result_.tokens.size());
    const int cap = static_cast<int>(
        std::min<std::int64_t>({controller_.max_draft(), remaining - 1, kMaxDraftPerRound}));
    controller_.begin_round();
    const LayerPlan& plan = drafter_.next_plan();
    plan.to_mask(std::span<std::uint64_t, LayerPlan::kMaskWords>(message.skip_mask));
    message.command = cap >= 1 ? ControlCommand::kDraft : ControlCommand::kVerify;
    return cap;
  }

  void broadcast(ControlMessage& message, const KvCache& kv) {
    const auto start = Clock::now();
    comm_.broadcast_object(message, 0);
    if (options_.debug_sync) check_sync(message, kv);
    ++step_;
    result_.stats.phases.comm_s += seconds_since(start);
  }

  void trace(const nlohmann::json& record) {
    if (trace_.is_open()) trace_ << record.dump() << "\n";
  }
  void flush_trace() {
    if (trace_.is_open()) trace_.flush();
  }

 private:
  void check_sync(const ControlMessage& message, const KvCache& kv) {
    std::uint64_t local = mix(message.checksum(), step_);
    local = mix(local, static_cast<std::uint64_t>(kv.length()));
    local = mix(local, message.step);
    std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_.size()));
    comm_.all_gather_u64(local, all);
    for (std::size_t r = 1; r < all.size(); ++r) {
      if (all[r] != all[0]) {
        fail(
            "--debug-sync: ranks diverged at control step {}: rank {} has state checksum {:016x}, "
            "rank 0 has {:016x} (message, step counter and KV length must agree on every rank)",
            step_, r, all[r], all[0]);
      }
    }
  }

  LlamaModel& model_;
  Communicator& comm_;
  Drafter& drafter_;
  DraftLengthController& controller_;
  const SpeculativeOptions& options_;
  const TokenCallback& on_token_;
  SpeculativeResult& result_;
  std::ofstream trace_;
  std::uint64_t step_ = 0;
};

}  // namespace

SpeculativeDecoder::SpeculativeDecoder(LlamaModel& model, Communicator& comm, Drafter& drafter,
                                       DraftLengthController& controller)
    : model_(model), comm_(comm), drafter_(drafter), controller_(controller) {}

SpeculativeResult SpeculativeDecoder::generate(std::span<const std::int32_t> prompt,
                                               const SpeculativeOptions& options, KvCache& kv,
                                               const TokenCallback& on_token) {
  const GenerationOptions& generation = options.generation;
  check_generation_inputs(prompt, generation, kv);
  const auto n_prompt = static_cast<std::int64_t>(prompt.size());
  SpeculativeResult result;
  if (generation.max_new_tokens == 0) return result;

  Verifier verifier(generation.logits, comm_, model_.shard(), generation.sampling);
  Round round(model_, comm_, drafter_, controller_, options, on_token, result);
  SpeculativeStats& stats = result.stats;
  PhaseTimes& phases = stats.phases;
  const int num_layers = static_cast<int>(model_.config().num_layers);
  std::vector<float> logits;

  // Prefill and the first token.
  const double comm_at_start = model_.counters().comm_seconds;
  auto start = Clock::now();
  prefill(model_, prompt, generation.prefill_chunk, kv, logits);
  result.timings.prefill_tokens = n_prompt;
  const std::int32_t first = verifier.next_token(logits);
  ControlMessage message;
  int cap = 0;
  if (comm_.is_root()) {
    const bool complete = round.emit(first);
    const int signal = complete ? 0 : round.interrupt();
    message.tokens[0] = first;
    message.n_tokens = 1;
    message.flags =
        (result.stopped_on_eos ? kFlagEos : 0u) | (signal != 0 ? interrupted_flags(signal) : 0u);
    if (complete || signal != 0) {
      message.command = ControlCommand::kStop;
    } else {
      cap = round.plan_next_round(message);
    }
  }
  round.broadcast(message, kv);
  if (!comm_.is_root()) result.tokens.push_back(message.tokens[0]);
  std::int32_t pending = message.tokens[0];
  result.timings.prefill_seconds = seconds_since(start);
  const double verifier_comm_at_rounds = verifier.comm_seconds();
  const double model_comm_at_rounds = model_.counters().comm_seconds;
  phases = {};
  start = Clock::now();

  std::array<std::uint64_t, LayerPlan::kMaskWords> plan_mask{};
  LayerPlan draft_plan = LayerPlan::full(num_layers);
  std::vector<std::int32_t> drafted;
  std::vector<double> confidences;
  std::vector<std::int32_t> verify_tokens, verify_positions, verify_rows;
  while (message.command != ControlCommand::kStop) {
    const std::int64_t base = kv.length();
    if (!std::equal(plan_mask.begin(), plan_mask.end(), message.skip_mask.begin())) {
      std::copy(message.skip_mask.begin(), message.skip_mask.end(), plan_mask.begin());
      draft_plan = LayerPlan::from_mask(num_layers, plan_mask);
    }
    drafted.clear();
    confidences.clear();
    verifier.begin_round();
    std::int32_t last = pending;

    // Drafting: one forward per token with the draft plan.
    while (message.command == ControlCommand::kDraft) {
      const auto position =
          static_cast<std::int32_t>(base + static_cast<std::int64_t>(drafted.size()));
      const std::int32_t row = 0;
      ForwardArgs args;
      args.tokens = {&last, 1};
      args.positions = {&position, 1};
      args.plan = &draft_plan;
      args.logit_rows = {&row, 1};
      const double model_comm = model_.counters().comm_seconds;
      auto t0 = Clock::now();
      model_.forward(args, kv, logits);
      const double forward_s = seconds_since(t0);
      stats.draft_forward_s += forward_s;
      phases.draft_s += forward_s - (model_.counters().comm_seconds - model_comm);
      ++stats.draft_forwards;

      t0 = Clock::now();
      const double verifier_comm = verifier.comm_seconds();
      const DraftChoice choice = verifier.draft(logits);
      if (comm_.is_root()) {
        drafted.push_back(choice.token);
        confidences.push_back(choice.confidence);
        const bool more =
            static_cast<int>(drafted.size()) < cap &&
            controller_.continue_drafting(static_cast<int>(drafted.size()), choice.confidence);
        message.command = more ? ControlCommand::kDraft : ControlCommand::kVerify;
        message.tokens[0] = choice.token;
        message.n_tokens = 1;
        message.accepted = 0;
      }
      phases.control_s += seconds_since(t0) - (verifier.comm_seconds() - verifier_comm);
      ++message.step;
      round.broadcast(message, kv);
      if (!comm_.is_root()) drafted.push_back(message.tokens[0]);
      last = drafted.back();
    }

    // Verification: one full forward over [pending, drafts], overwriting the draft's KV.
    kv.truncate(base);
    const auto k = static_cast<std::int64_t>(drafted.size());
    verify_tokens.assign(1, pending);
    verify_tokens.insert(verify_tokens.end(), drafted.begin(), drafted.end());
    verify_positions.resize(static_cast<std::size_t>(k + 1));
    std::iota(verify_positions.begin(), verify_positions.end(), static_cast<std::int32_t>(base));
    verify_rows.resize(static_cast<std::size_t>(k + 1));
    std::iota(verify_rows.begin(), verify_rows.end(), 0);
    ForwardArgs args;
    args.tokens = verify_tokens;
    args.positions = verify_positions;
    args.logit_rows = verify_rows;
    const double model_comm = model_.counters().comm_seconds;
    auto t0 = Clock::now();
    model_.forward(args, kv, logits);
    const double forward_s = seconds_since(t0);
    stats.verify_forward_s += forward_s;
    phases.verify_s += forward_s - (model_.counters().comm_seconds - model_comm);
    ++stats.verify_forwards;

    t0 = Clock::now();
    const double verifier_comm = verifier.comm_seconds();
    const Verdict verdict = verifier.verify(logits, drafted);
    if (comm_.is_root()) {
      bool stop = false;
      std::uint32_t emitted = 0;
      for (int i = 0; i <= verdict.accepted && !stop; ++i) {
        const std::int32_t token =
            i < verdict.accepted ? drafted[static_cast<std::size_t>(i)] : verdict.next_token;
        message.tokens[emitted++] = token;
        stop = round.emit(token);
      }
      message.n_tokens = emitted;
      message.accepted = static_cast<std::uint32_t>(verdict.accepted);
      const int signal = stop ? 0 : round.interrupt();
      message.flags =
          (result.stopped_on_eos ? kFlagEos : 0u) | (signal != 0 ? interrupted_flags(signal) : 0u);
      if (k > 0) {
        controller_.update(static_cast<int>(k), verdict.accepted);
        drafter_.observe(static_cast<int>(k), verdict.accepted);
      }
      round.trace({{"round", stats.rounds},
                   {"drafted", k},
                   {"accepted", verdict.accepted},
                   {"emitted", emitted},
                   {"draft_tokens", drafted},
                   {"confidences", confidences},
                   {"next_token", verdict.next_token},
                   {"controller", controller_.state()},
                   {"plan", draft_plan.describe()}});
      if (stop || signal != 0) {
        message.command = ControlCommand::kStop;
      } else {
        cap = round.plan_next_round(message);
      }
    }
    phases.control_s += seconds_since(t0) - (verifier.comm_seconds() - verifier_comm);
    ++message.step;
    round.broadcast(message, kv);
    if (!comm_.is_root()) {
      for (std::uint32_t i = 0; i < message.n_tokens; ++i)
        result.tokens.push_back(message.tokens[i]);
    }
    ++stats.rounds;
    stats.drafted += k;
    stats.accepted += message.accepted;
    stats.round_tokens += message.n_tokens;
    kv.truncate(base + 1 + static_cast<std::int64_t>(message.accepted));
    if (message.command != ControlCommand::kStop) pending = message.tokens[message.n_tokens - 1];
  }
  round.flush_trace();
  result.stopped_on_eos = (message.flags & kFlagEos) != 0;
  result.interrupt_signal = interrupt_signal_of(message.flags);
  result.timings.decode_seconds = stats.rounds > 0 ? seconds_since(start) : 0.0;
  result.timings.decode_forwards = stats.round_tokens;  // tokens produced after the first
  phases.comm_s += (model_.counters().comm_seconds - model_comm_at_rounds) +
                   (verifier.comm_seconds() - verifier_comm_at_rounds);
  // Prefill's collectives, then everything after the first token.
  result.timings.comm_seconds =
      (model_comm_at_rounds - comm_at_start) + verifier_comm_at_rounds + phases.comm_s;
  return result;
}

}  // namespace selfspec
