// One generation run of the decoding loop on one rank: its state (the KV cache, the last
// committed token, the round's draft and plan, rank 0's control message, the output) and its
// steps, which decode/decoder.cpp calls in order:
//
//   first_token()   all ranks prefill the prompt (the drafter may observe it: begin_request);
//                   rank 0 picks the first token and plans round 1
//   then, until rank 0 says stop, one round:
//     draft()       the drafter proposes a draft through this run (a DraftContext): one draft
//                   forward per token under the round's layer plan, rank 0 picking each token
//                   (with --tree also its alternatives, by confidence: draft/tree_widths.hpp)
//                   and deciding with the draft-length controller whether to go on. Plain
//                   decoding — no drafter, or no budget left to draft — gives an empty draft.
//     verify()      one full forward over [last committed token, draft nodes] (a tree under its
//                   tree mask, each node at the position after its parent); rank 0's verdict
//                   (accepted path, the target's next token), the tokens it emits and the next
//                   round's plan travel to every rank in one control message
//     commit()      every rank keeps the KV rows of the accepted path (rollback is a length
//                   change; a tree's path is first moved next to the root: KvCache::keep_rows)
//                   and continues from the target's token
//   finish()        the result: tokens, why it stopped, timings, statistics
//
// Ranks other than 0 never look at logits: they obey messages, so every rank runs the same
// forwards and collectives (Draft & Verify §3.2, Alg. 3/4; Leviathan et al. 2023 for sampling).
#pragma once

#include "comm/communicator.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/control_message.hpp"
#include "decode/forward_port.hpp"
#include "decode/generation_options.hpp"
#include "decode/generation_result.hpp"
#include "decode/hidden_state_tap.hpp"
#include "decode/phase_timer.hpp"
#include "decode/rank0_channel.hpp"
#include "draft/drafter.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"
#include "verify/token_picker.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace selfspec {

// Device-side verification: on a device-memory backend (CUDA) the verifier reads the logits
// where the LM head left them (ShardReductions on the device), never from a host copy of every
// rank's shard.
bool logits_stay_on_device(const LlamaModel& model);
// Where rank 0's decisions come from, for reports: "host" (a host-memory backend), "device"
// (--logits local on a device backend: per-row reductions on the device, only scalars and token
// ids reach the host) or "device-gather" (--logits gather or tp-invariant on a device backend:
// whole rows travel from device memory by the device exchange to rank 0's host).
std::string_view verification_path(const LlamaModel& model, LogitsMode mode);

class DecodingRun final : public DraftContext {
 public:
  // drafter and controller: both, for self-speculative decoding (they decide on rank 0), or
  // neither, for plain decoding. The references must outlive the run.
  // port: where the forwards go (decode/forward_port.hpp); nullptr: straight to the model.
  DecodingRun(LlamaModel& model, Communicator& comm, Drafter* drafter,
              DraftLengthController* controller, const GenerationOptions& options, KvCache& kv,
              const TokenCallback& on_token, ForwardPort* port = nullptr);

  // Rank 0: the most tokens the rounds planned from now on may draft (the batched loop sizes
  // drafts to the load: control/goodput_sizing.hpp); kMaxDraftTokens by default, 0 for plain
  // decoding rounds.
  void limit_draft(int limit);

  void first_token(std::span<const std::int32_t> prompt);
  bool finished() const { return channel_.message().command == ControlCommand::kStop; }
  const Draft& draft();
  Verdict verify(const Draft& draft);
  void commit(const Verdict& verdict);
  GenerationResult finish();

  // DraftContext
  const DraftPlan& plan() const override { return round_.plan; }
  DraftStep step(const Draft& draft, int parent) override;
  DraftStep step_rows(const Draft& draft, int parent, const DraftRows& rows) override;
  bool is_root() const override { return comm_.is_root(); }
  std::int64_t generated() const override {
    return static_cast<std::int64_t>(channel_.tokens().size());
  }
  void share(std::span<std::byte> data) override;
  DraftMatch score_plan(const LayerPlan& candidate, int window) override;
  void history(std::vector<std::int32_t>& out) const override;
  int draft_room() const override;
  int node_room() const override;

 private:
  // The state of the current round, known on every rank unless noted.
  struct Round {
    std::int32_t root_token = -1;  // the last committed token: in the output, not yet in the KV
    std::int64_t base = 0;         // the KV length at the round's start
    int cap = 0;                   // rank 0: most tokens the round may draft
    DraftPlan plan;                // what the draft forwards run (from rank 0's message)
    Draft draft;
  };
  // One forward's inputs and the view of its logits.
  struct Forward {
    std::vector<std::int32_t> tokens, positions, rows;
    std::vector<float> host_logits;  // the logits on a host-memory backend
    LogitRows logits;                // the last forward's rows, where they live
  };

  void prefill(std::span<const std::int32_t> prompt);
  // The arguments every forward of the run shares: its tokens, positions and logit rows, the
  // logits left where the LM head writes them (device-side verification), and, on rank 0 with a
  // hidden-state tap, the tap's observer (final norm only).
  ForwardArgs forward_args(std::span<const std::int32_t> tokens,
                           std::span<const std::int32_t> positions,
                           std::span<const std::int32_t> rows);
  void run_forward(const ForwardArgs& args);
  // A drafter's observer (may be null) on the forward too: beside the tap's, or alone seeing
  // "final_residual".
  void add_observer(ForwardArgs& args, const ForwardObserver* observer);
  // After a draft step's forwards: rank 0 picks the token (and its alternatives) and decides
  // whether drafting goes on; every rank learns both.
  DraftStep pick_step(const Draft& draft);
  // Rank 0, once the step's tokens are emitted (`ended`: one of them ended generation): stop, or
  // plan the next round.
  void close_step(bool ended);
  // Rank 0: the next round's command, draft cap and draft plan into the message.
  void plan_next_round();
  // Every rank: the round's plan from the message.
  void adopt_plan();
  // Rank 0: the verdict's tokens, the learners' updates, the stop decision or the next round.
  void decide_round(const Draft& draft, const Verdict& verdict);
  // Other ranks: the verdict rank 0's message carries (the path through `draft`).
  Verdict verdict_from_message(const Draft& draft) const;
  // Rank 0: how many nodes this round's draft may hold (--tree-max-nodes, the KV cache's room).
  int node_budget() const;
  // Rank 0: how many of a draft step's alternatives join the tree (the step's tree width, the
  // node budget).
  int alternatives_for(const Draft& draft, const DraftChoice& choice) const;
  void report_round(const Draft& draft, const Verdict& verdict);

  LlamaModel& model_;
  Communicator& comm_;
  Drafter* drafter_;
  DraftLengthController* controller_;
  const GenerationOptions& options_;
  KvCache& kv_;
  ForwardPort* port_;
  int draft_limit_ = kMaxDraftTokens;
  GenerationResult result_;
  TokenPicker picker_;
  Rank0Channel channel_;  // the step's message and the output
  PhaseTimer timer_;
  Round round_;
  Forward forward_;
  std::vector<std::int32_t> prompt_;             // for score_plan's windows
  std::unique_ptr<ShardedLogits> score_reader_;  // score_plan's argmax (local reduction)
  // Rank 0, when the controller predicts from hidden states (Cali-TS).
  std::unique_ptr<HiddenStateTap> tap_;
};

}  // namespace selfspec
