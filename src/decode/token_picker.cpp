#include "decode/token_picker.hpp"

#include "core/error.hpp"

#include <boost/random/uniform_01.hpp>

#include <chrono>
#include <cmath>
#include <unordered_map>

namespace selfspec {

TokenPicker::TokenPicker(LogitsMode mode, Communicator& comm, const ShardPlan& shard,
                         const SamplingParams& sampling)
    : comm_(comm),
      logits_(make_sharded_logits(mode, comm, shard)),
      sampling_(sampling),
      vocab_local_(shard.vocab.size()),
      rng_(sampling.seed) {
  sampling_.validate();
  if (sampling_.greedy()) {
    kind_ = Kind::kGreedy;
  } else if (sampling_.top_k > 0 || sampling_.top_p < 1.0) {
    kind_ = Kind::kSparse;
    inv_temperature_ = 1.0 / sampling_.temperature;
  } else {
    kind_ = Kind::kDense;
    inv_temperature_ = 1.0 / sampling_.temperature;
  }
}

double TokenPicker::uniform() {
  boost::random::uniform_01<double> draw;
  return draw(rng_);
}

template <typename T>
void TokenPicker::share(T& value) {
  if (logits_->shares_nothing()) return;
  const auto start = std::chrono::steady_clock::now();
  comm_.broadcast_object(value, 0);
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::int32_t TokenPicker::next_token(std::span<const float> local_row) {
  logits_->set_rows(local_row, 1);
  switch (kind_) {
    case Kind::kGreedy: {
      const std::vector<RowStats> stats = logits_->row_stats(1.0);
      return comm_.is_root() ? stats[0].argmax : -1;
    }
    case Kind::kSparse: {
      const std::vector<TokenDistribution> dists = logits_->warp(sampling_);
      return comm_.is_root() ? draw_from(dists[0], uniform()) : -1;
    }
    case Kind::kDense: {
      const std::vector<RowStats> stats = logits_->row_stats(inv_temperature_);
      const double target = comm_.is_root() ? uniform() * stats[0].sum_exp : 0.0;
      const RowStats empty;
      return logits_->sample_dense(0, comm_.is_root() ? stats[0] : empty, inv_temperature_, target)
          .id;
    }
  }
  return -1;
}

void TokenPicker::begin_round() {
  q_stats_.clear();
  q_token_logit_.clear();
  q_slot_.clear();
  q_dists_.clear();
  logits_->clear_retained();
}

DraftChoice TokenPicker::draft(std::span<const float> local_row) {
  logits_->set_rows(local_row, 1);
  DraftChoice choice;
  switch (kind_) {
    case Kind::kGreedy: {
      const std::vector<RowStats> stats = logits_->row_stats(1.0);
      if (comm_.is_root()) choice = {stats[0].argmax, stats[0].top_probability()};
      return choice;
    }
    case Kind::kSparse: {
      std::vector<TokenDistribution> dists = logits_->warp(sampling_);
      if (comm_.is_root()) {
        choice = {draw_from(dists[0], uniform()), dists[0].probs.front()};
        q_dists_.push_back(std::move(dists[0]));
      }
      return choice;
    }
    case Kind::kDense: {
      std::vector<RowStats> stats = logits_->row_stats(inv_temperature_);
      const double target = comm_.is_root() ? uniform() * stats[0].sum_exp : 0.0;
      const RowStats empty;
      const DrawnToken drawn =
          logits_->sample_dense(0, comm_.is_root() ? stats[0] : empty, inv_temperature_, target);
      q_slot_.push_back(logits_->retain(0));
      if (comm_.is_root()) {
        choice = {drawn.id, stats[0].top_probability()};
        q_token_logit_.push_back(drawn.logit);
        q_stats_.push_back(std::move(stats[0]));
      }
      return choice;
    }
  }
  return choice;
}

Verdict TokenPicker::verify(std::span<const float> local_rows, const Draft& draft) {
  SELFSPEC_CHECK(draft.is_chain(),
                 "verify: the draft is a token tree; this picker verifies chains (tree "
                 "verification walks the tree with a tree mask)");
  Verdict verdict;
  if (draft.empty()) {
    verdict.next_token = next_token(local_rows);
    return verdict;
  }
  const std::span<const std::int32_t> drafted = draft.tokens();
  const auto k = static_cast<std::int64_t>(drafted.size());
  SELFSPEC_CHECK(static_cast<std::int64_t>(local_rows.size()) == (k + 1) * vocab_local_,
                 "verify: {} logits for {} drafted tokens", local_rows.size(), k);
  logits_->set_rows(local_rows, k + 1);
  int accepted = 0;
  switch (kind_) {
    case Kind::kGreedy:
      accepted = accept_greedy(drafted, verdict.next_token);
      break;
    case Kind::kSparse:
      accepted = accept_sparse(drafted, verdict.next_token);
      break;
    case Kind::kDense:
      accepted = accept_dense(drafted, verdict.next_token);
      break;
  }
  for (int node = 0; node < accepted; ++node) verdict.accepted.push_back(node);
  return verdict;
}

int TokenPicker::accept_greedy(std::span<const std::int32_t> drafted, std::int32_t& next) {
  const std::vector<RowStats> stats = logits_->row_stats(1.0);
  if (!comm_.is_root()) return 0;
  const auto k = static_cast<int>(drafted.size());
  int accepted = 0;
  while (accepted < k && drafted[static_cast<std::size_t>(accepted)] ==
                             stats[static_cast<std::size_t>(accepted)].argmax) {
    ++accepted;
  }
  next = stats[static_cast<std::size_t>(accepted)].argmax;
  return accepted;
}

int TokenPicker::accept_sparse(std::span<const std::int32_t> drafted, std::int32_t& next) {
  const std::vector<TokenDistribution> p = logits_->warp(sampling_);
  if (!comm_.is_root()) return 0;
  const auto k = static_cast<int>(drafted.size());
  SELFSPEC_CHECK(static_cast<int>(q_dists_.size()) == k,
                 "verify: {} draft distributions for {} drafts", q_dists_.size(), k);
  int accepted = 0;
  for (; accepted < k; ++accepted) {
    const auto j = static_cast<std::size_t>(accepted);
    const double p_x = p[j].prob_of(drafted[j]);
    const double q_x = q_dists_[j].prob_of(drafted[j]);
    if (!(uniform() * q_x < p_x)) break;  // accept with probability min(1, p/q)
  }
  const auto j = static_cast<std::size_t>(accepted);
  if (accepted == k) {
    next = draw_from(p[j], uniform());  // bonus token from p
    return accepted;
  }
  // Rejected: draw from norm(max(0, p − q)) over p's support (q's mass outside it only lowers the
  // residual to zero there), in p's order.
  std::unordered_map<std::int32_t, double> q_of;
  for (std::size_t i = 0; i < q_dists_[j].ids.size(); ++i)
    q_of[q_dists_[j].ids[i]] = q_dists_[j].probs[i];
  TokenDistribution residual;
  double mass = 0.0;
  for (std::size_t i = 0; i < p[j].ids.size(); ++i) {
    const auto it = q_of.find(p[j].ids[i]);
    const double weight = p[j].probs[i] - (it == q_of.end() ? 0.0 : it->second);
    if (weight > 0.0) {
      residual.ids.push_back(p[j].ids[i]);
      residual.probs.push_back(weight);
      mass += weight;
    }
  }
  const double u = uniform();
  if (mass > 0.0) {
    for (double& w : residual.probs) w /= mass;
    next = draw_from(residual, u);
  } else {
    next = draw_from(p[j], uniform());
  }
  return accepted;
}

int TokenPicker::accept_dense(std::span<const std::int32_t> drafted, std::int32_t& next) {
  const auto k = static_cast<int>(drafted.size());
  const std::vector<RowStats> p = logits_->row_stats(inv_temperature_);
  const std::vector<float> p_logit = logits_->logits_of(drafted);

  // Rank 0 runs the acceptance tests and draws the uniform for what follows; the other ranks
  // learn which row is sampled next (the local-reduction access needs them for it).
  struct Decision {
    std::int32_t accepted = 0;
    std::int32_t padding = 0;
    double u = 0.0;
    DensePair pair;
  } decision;
  if (comm_.is_root()) {
    SELFSPEC_CHECK(static_cast<int>(q_stats_.size()) == k,
                   "verify: {} draft distributions for {} drafts", q_stats_.size(), k);
    for (; decision.accepted < k; ++decision.accepted) {
      const auto j = static_cast<std::size_t>(decision.accepted);
      const double p_x = p[j].probability(static_cast<double>(p_logit[j]) * inv_temperature_);
      const double q_x =
          q_stats_[j].probability(static_cast<double>(q_token_logit_[j]) * inv_temperature_);
      if (!(uniform() * q_x < p_x)) break;  // accept with probability min(1, p/q)
    }
    decision.u = uniform();
    if (decision.accepted < k) {
      const auto j = static_cast<std::size_t>(decision.accepted);
      decision.pair = {p[j].max, p[j].sum_exp, q_stats_[j].max, q_stats_[j].sum_exp,
                       inv_temperature_};
    }
  }
  share(decision);

  const std::int64_t row = decision.accepted;
  const RowStats empty;
  const RowStats& p_row = comm_.is_root() ? p[static_cast<std::size_t>(row)] : empty;
  if (decision.accepted == k) {
    // Every draft accepted: a bonus token from p at the next position.
    const double target = comm_.is_root() ? decision.u * p_row.sum_exp : 0.0;
    next = logits_->sample_dense(row, p_row, inv_temperature_, target).id;
    return decision.accepted;
  }
  const std::optional<std::int32_t> residual = logits_->sample_residual(
      row, q_slot_[static_cast<std::size_t>(row)], decision.pair, decision.u);
  if (residual) {
    next = *residual;
    return decision.accepted;
  }
  // p == q up to rounding: the residual is empty, and p itself is the right distribution.
  double target = comm_.is_root() ? uniform() * p_row.sum_exp : 0.0;
  next = logits_->sample_dense(row, p_row, inv_temperature_, target).id;
  return decision.accepted;
}

}  // namespace selfspec
