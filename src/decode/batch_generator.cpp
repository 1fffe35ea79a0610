#include "decode/batch_generator.hpp"

#include "core/error.hpp"
#include "model/sequence_batch.hpp"
#include "verify/token_picker.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

namespace selfspec {
namespace {

// A request in flight.
struct Slot {
  std::int64_t request = -1;         // -1: free
  std::vector<std::int32_t> tokens;  // prompt, then the generated tokens
  std::int64_t max_new_tokens = 0;
  std::int64_t generated = 0;
  bool generating = false;  // still choosing tokens
  bool stopped_on_eos = false;
  std::unique_ptr<TokenPicker> picker;
  std::int64_t take = 0;       // tokens fed in the current pass
  std::int32_t pick_row = -1;  // the current pass's logit row that chooses its next token
};

class Run {
 public:
  Run(LlamaModel& model, Communicator& comm, const BatchGeneratorOptions& options,
      std::span<const BatchRequest> requests, BatchGeneratorStats& stats)
      : model_(model),
        comm_(comm),
        options_(options),
        requests_(requests),
        stats_(stats),
        batch_(model, options.batch, capacity_for(requests)),
        slots_(static_cast<std::size_t>(options.batch)) {}

  bool run(const BatchGenerator::PassCallback& on_pass,
           const BatchGenerator::DoneCallback& on_done) {
    while (true) {
      fill_slots();
      if (!plan_pass()) return true;  // every request done
      const auto start = std::chrono::steady_clock::now();
      const LogitRows logits =
          batch_.forward(model_, steps_, logits_, options_.observer, options_.observe_only);
      ++stats_.passes;
      stats_.tokens += static_cast<std::int64_t>(rows_.size());
      if (on_pass) on_pass(rows_, logits);
      pick_tokens(logits);
      stats_.seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!finish_slots(on_done)) return false;
    }
  }

 private:
  static std::int64_t capacity_for(std::span<const BatchRequest> requests) {
    std::int64_t capacity = 1;
    for (const BatchRequest& r : requests) {
      SELFSPEC_CHECK(!r.prompt.empty(), "batched generation: a request has an empty prompt");
      SELFSPEC_CHECK(r.max_new_tokens >= 0, "batched generation: max_new_tokens {} < 0",
                     r.max_new_tokens);
      capacity = std::max(capacity, static_cast<std::int64_t>(r.prompt.size()) + r.max_new_tokens);
    }
    return capacity;
  }

  // Free slots take the next requests, in order.
  void fill_slots() {
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      Slot& slot = slots_[s];
      if (slot.request >= 0 || next_request_ >= static_cast<std::int64_t>(requests_.size()))
        continue;
      const BatchRequest& request = requests_[static_cast<std::size_t>(next_request_)];
      slot.request = next_request_++;
      slot.tokens = request.prompt;
      slot.max_new_tokens = request.max_new_tokens;
      slot.generated = 0;
      slot.generating = request.max_new_tokens > 0;
      slot.stopped_on_eos = false;
      slot.picker = slot.generating
                        ? std::make_unique<TokenPicker>(
                              TokenPickerOptions{.mode = LogitsMode::kLocal,
                                                 .sampling = request.sampling,
                                                 .tp_invariant = model_.reduction_order() ==
                                                                 ReductionOrder::kTpInvariant},
                              comm_, model_.shard())
                        : nullptr;
      batch_.truncate(static_cast<std::int64_t>(s), 0);
    }
  }

  std::int64_t pending(std::size_t s) const {
    const Slot& slot = slots_[s];
    if (slot.request < 0) return 0;
    return static_cast<std::int64_t>(slot.tokens.size()) -
           batch_.length(static_cast<std::int64_t>(s));
  }

  // This pass's steps and rows: one token for every slot with tokens to feed, then the rest of
  // the budget to the prefilling slots, oldest request first (so that requests finish, and are
  // handed over, close to their order). False when no slot has tokens to feed.
  bool plan_pass() {
    std::int64_t budget = options_.pass_tokens;
    by_age_.clear();
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      slots_[s].take = pending(s) > 0 ? 1 : 0;
      budget -= slots_[s].take;
      if (slots_[s].take > 0) by_age_.push_back(s);
    }
    std::sort(by_age_.begin(), by_age_.end(),
              [&](std::size_t a, std::size_t b) { return slots_[a].request < slots_[b].request; });
    for (std::size_t s : by_age_) {
      if (budget <= 0) break;
      const std::int64_t more = std::min(pending(s) - slots_[s].take, budget);
      if (more <= 0) continue;
      slots_[s].take += more;
      budget -= more;
    }
    steps_.clear();
    rows_.clear();
    row_lists_.clear();
    row_lists_.reserve(slots_.size());
    std::int32_t logit_row = 0;
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      Slot& slot = slots_[s];
      slot.pick_row = -1;
      if (slot.take == 0) continue;
      const std::int64_t fed = batch_.length(static_cast<std::int64_t>(s));
      const bool completes = fed + slot.take == static_cast<std::int64_t>(slot.tokens.size());
      std::vector<std::int32_t>& list = row_lists_.emplace_back();
      for (std::int64_t i = 0; i < slot.take; ++i) {
        const bool picks = completes && slot.generating && i + 1 == slot.take;
        const bool logits = options_.all_logit_rows || picks;
        if (logits) list.push_back(static_cast<std::int32_t>(i));
        if (picks) slot.pick_row = logit_row;
        rows_.push_back({slot.request, fed + i, slot.tokens[static_cast<std::size_t>(fed + i)],
                         logits ? logit_row++ : -1});
      }
      steps_.push_back(
          {static_cast<std::int64_t>(s),
           std::span(slot.tokens)
               .subspan(static_cast<std::size_t>(fed), static_cast<std::size_t>(slot.take)),
           list});
    }
    return !steps_.empty();
  }

  // Every slot that completed its known tokens and is still generating gets its next token:
  // each picker decides on rank 0 (a collective per slot, in slot order), then one broadcast.
  void pick_tokens(const LogitRows& logits) {
    picks_.clear();
    const auto width = static_cast<std::size_t>(model_.vocab_local());
    for (Slot& slot : slots_) {
      if (slot.pick_row < 0) continue;
      const std::span<const float> row(
          logits.data + static_cast<std::size_t>(slot.pick_row) * width, width);
      picks_.push_back(slot.picker->next_token(row));
    }
    if (picks_.empty()) return;
    comm_.broadcast(std::as_writable_bytes(std::span<std::int32_t>(picks_)), 0);
    std::size_t next = 0;
    for (Slot& slot : slots_) {
      if (slot.pick_row < 0) continue;
      const std::int32_t token = picks_[next++];
      slot.tokens.push_back(token);
      ++slot.generated;
      const std::vector<std::int32_t>& eos = options_.eos_ids;
      slot.stopped_on_eos = std::find(eos.begin(), eos.end(), token) != eos.end();
      if (slot.stopped_on_eos || slot.generated >= slot.max_new_tokens) slot.generating = false;
    }
  }

  // Slots whose requests are complete hand them over (in request order) and become free.
  bool finish_slots(const BatchGenerator::DoneCallback& on_done) {
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      Slot& slot = slots_[s];
      if (slot.request < 0 || slot.generating) continue;
      const bool whole = options_.feed_last || slot.max_new_tokens == 0;
      const auto needed = static_cast<std::int64_t>(slot.tokens.size()) - (whole ? 0 : 1);
      if (batch_.length(static_cast<std::int64_t>(s)) < needed) continue;
      const auto prompt = requests_[static_cast<std::size_t>(slot.request)].prompt.size();
      BatchResult result;
      result.tokens.assign(slot.tokens.begin() + static_cast<std::ptrdiff_t>(prompt),
                           slot.tokens.end());
      result.stopped_on_eos = slot.stopped_on_eos;
      done_.emplace(slot.request, std::move(result));
      slot.request = -1;
      slot.picker.reset();
    }
    for (auto it = done_.find(next_done_); it != done_.end(); it = done_.find(next_done_)) {
      BatchResult result = std::move(it->second);
      done_.erase(it);
      if (!on_done(next_done_++, std::move(result))) return false;
    }
    return true;
  }

  LlamaModel& model_;
  Communicator& comm_;
  const BatchGeneratorOptions& options_;
  std::span<const BatchRequest> requests_;
  BatchGeneratorStats& stats_;
  SequenceBatch batch_;
  std::vector<Slot> slots_;
  std::int64_t next_request_ = 0;
  std::int64_t next_done_ = 0;
  std::map<std::int64_t, BatchResult> done_;
  // The current pass.
  std::vector<SequenceBatch::Step> steps_;
  std::vector<BatchRow> rows_;
  std::vector<std::vector<std::int32_t>> row_lists_;
  std::vector<float> logits_;
  std::vector<std::int32_t> picks_;
  std::vector<std::size_t> by_age_;
};

}  // namespace

BatchGenerator::BatchGenerator(LlamaModel& model, Communicator& comm, BatchGeneratorOptions options)
    : model_(model), comm_(comm), options_(std::move(options)) {
  SELFSPEC_CHECK(options_.batch >= 1, "batched generation: --batch {} must be at least 1",
                 options_.batch);
  SELFSPEC_CHECK(options_.batch == 1 || model.backend().host_memory(),
                 "--batch {}: several sequences per forward run on host-memory backends (the "
                 "CPU); use --batch 1 on {}",
                 options_.batch, model.backend().description().summary());
  SELFSPEC_CHECK(options_.pass_tokens >= options_.batch,
                 "batched generation: a pass of {} tokens cannot feed {} sequences one token each",
                 options_.pass_tokens, options_.batch);
}

bool BatchGenerator::run(std::span<const BatchRequest> requests, const PassCallback& on_pass,
                         const DoneCallback& on_done) {
  if (requests.empty()) return true;
  Run run(model_, comm_, options_, requests, stats_);
  return run.run(on_pass, on_done);
}

}  // namespace selfspec
