// SourcedDrafter: draft sources tried in order before the model's own draft (llama.cpp's
// common_speculative implementations, beyond the seeds). Before each round rank 0 asks each
// source (draft/draft_source.hpp; lookup drafts are one) for a chain continuing the sequence; the
// first that proposes drafts the round, a chain verified like any other with no draft forward at
// all, marked as such on the draft (Draft::mark_lookup). Otherwise the model's own drafter (a
// skip set, an early-exit head, SWIFT, with or without --draft-weights, or plain steps) drafts
// the round as it would alone. Rank 0 decides and every rank receives the tokens
// (DraftContext::share), so all ranks verify the same draft. The draft-length controller and the
// model's drafter learn only from their own rounds.
#pragma once

#include "draft/draft_source.hpp"
#include "draft/drafter.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace selfspec {

class SourcedDrafter final : public Drafter {
 public:
  SourcedDrafter(std::vector<std::unique_ptr<DraftSource>> sources,
                 std::unique_ptr<Drafter> model_drafter);

  std::string_view name() const override { return name_; }
  const ForwardObserver* begin_request(std::int64_t prompt_tokens) override {
    return model_drafter_->begin_request(prompt_tokens);
  }
  DraftPlan next_plan() override { return model_drafter_->next_plan(); }
  // The model's drafter sees every verification, a source's rounds included (a feature head
  // reads the target's features of every committed token).
  const ForwardObserver* verification_observer() override {
    return model_drafter_->verification_observer();
  }
  void verified(const Draft& draft, const Verdict& verdict) override {
    model_drafter_->verified(draft, verdict);
  }
  void propose(DraftContext& context, Draft& draft) override;
  void observe(const Draft& draft, const Verdict& verdict) override;
  // Sources propose point masses (the verifier walks warped distributions under sampling).
  bool point_mass_drafts() const override { return !sources_.empty(); }
  // {"<source>": {"rounds", "drafted", "accepted", its settings...} per source,
  //  "fallback": the model drafter's state}.
  nlohmann::json state() const override;

 private:
  struct Counts {
    std::int64_t rounds = 0;  // rank 0: rounds the source drafted, their tokens, those accepted
    std::int64_t drafted = 0;
    std::int64_t accepted = 0;
  };
  std::vector<std::unique_ptr<DraftSource>> sources_;
  std::unique_ptr<Drafter> model_drafter_;
  std::string name_;
  std::vector<std::int32_t> history_;  // rank 0's scratch
  std::vector<Counts> counts_;         // one per source
  int last_source_ = -1;               // rank 0: the source of the round being verified
};

}  // namespace selfspec
