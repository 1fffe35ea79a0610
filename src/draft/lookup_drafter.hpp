// LookupDrafter: copied text needs no forward (beyond the seeds). Before each round rank 0 looks
// the sequence's last n-gram up in the sequence itself (draft/ngram_lookup.hpp: LLMA §2.2, prompt
// lookup decoding); on a match, the tokens that followed it are the round's draft, a chain verified
// like any other, with no draft forward at all. Otherwise the wrapped drafter (a skip set, an
// early-exit head, SWIFT, with or without --draft-weights) drafts the round as it would alone.
// Rank 0 decides and every rank receives the tokens (DraftContext::share), so all ranks verify
// the same draft. Lookup rounds are marked on the draft (Draft::mark_lookup): the draft-length
// controller and the wrapped drafter learn only from their own rounds.
//
// A lookup token is a deterministic proposal (a point mass): greedy verification treats the chain
// like any other, and speculative sampling accepts each token with the target's probability of it
// (verify/token_picker.hpp, walk_lookup_sampled), so the output still follows the target.
#pragma once

#include "draft/drafter.hpp"
#include "draft/ngram_lookup.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace selfspec {

class LookupDrafter final : public Drafter {
 public:
  // The most tokens one lookup proposes (the control message's room, with the target's token).
  static constexpr int kMaxTokens = 32;

  LookupDrafter(std::unique_ptr<Drafter> fallback, NgramLookupOptions options);

  std::string_view name() const override { return name_; }
  const ForwardObserver* begin_request(std::int64_t prompt_tokens) override {
    return fallback_->begin_request(prompt_tokens);
  }
  DraftPlan next_plan() override { return fallback_->next_plan(); }
  void propose(DraftContext& context, Draft& draft) override;
  void observe(const Draft& draft, const Verdict& verdict) override;
  // {"lookup": {"rounds", "drafted", "accepted", "max_ngram", "min_ngram", "max_tokens"},
  //  "fallback": the wrapped drafter's state}.
  nlohmann::json state() const override;

 private:
  std::unique_ptr<Drafter> fallback_;
  NgramLookupOptions options_;
  std::string name_;
  std::vector<std::int32_t> history_;  // rank 0's scratch
  std::int64_t rounds_ = 0;            // rank 0: lookup rounds, their tokens, those accepted
  std::int64_t drafted_ = 0;
  std::int64_t accepted_ = 0;
};

}  // namespace selfspec
