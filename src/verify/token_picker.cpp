#include "verify/token_picker.hpp"

#include "core/error.hpp"

#include <boost/random/uniform_01.hpp>

#include <chrono>
#include <cmath>
#include <unordered_map>

namespace selfspec {

TokenPicker::TokenPicker(const TokenPickerOptions& options, Communicator& comm,
                         const ShardPlan& shard, std::unique_ptr<ShardReductions> reductions)
    : comm_(comm),
      logits_(make_sharded_logits(options.mode, comm, shard, options.tp_invariant,
                                  std::move(reductions))),
      sampling_(options.sampling),
      max_alternatives_(options.max_alternatives),
      vocab_local_(shard.vocab.size()),
      rng_(options.sampling.seed) {
  sampling_.validate();
  SELFSPEC_CHECK(max_alternatives_ >= 0, "token picker: {} alternatives per draft step",
                 max_alternatives_);
  const bool point_mass_drafts = options.point_mass_drafts;
  if (sampling_.greedy()) {
    kind_ = Kind::kGreedy;
  } else if (sampling_.top_k > 0 || sampling_.top_p < 1.0 || max_alternatives_ > 0 ||
             point_mass_drafts) {
    // Trees and lookup chains walk warped distributions on rank 0 (see the header).
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

void TokenPicker::set_rows(const LogitRows& rows, std::int64_t expected) {
  SELFSPEC_CHECK(rows.rows == expected && rows.width == vocab_local_,
                 "token picker: {} logit rows of {} where {} of {} were expected", rows.rows,
                 rows.width, expected, vocab_local_);
  logits_->set_rows(rows);
}

std::int32_t TokenPicker::next_token(const LogitRows& rows) {
  set_rows(rows, 1);
  switch (kind_) {
    case Kind::kGreedy: {
      const std::vector<std::int32_t> argmax = logits_->row_argmax();
      return comm_.is_root() ? argmax[0] : -1;
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

DraftChoice TokenPicker::draft(const LogitRows& rows) {
  set_rows(rows, 1);
  DraftChoice choice;
  switch (kind_) {
    case Kind::kGreedy: {
      const std::vector<RowStats> stats = logits_->row_stats(1.0);
      std::vector<TokenDistribution> top;
      if (max_alternatives_ > 0) {
        // The most likely tokens, ties by lower id like the argmax (collective: every rank).
        SamplingParams ranking;
        ranking.temperature = 1.0;
        ranking.top_k = max_alternatives_ + 1;
        top = logits_->warp(ranking);
      }
      if (comm_.is_root()) {
        choice.token = stats[0].argmax;
        choice.confidence = stats[0].top_probability();
        if (!top.empty()) choice.alternatives = alternatives_from(top[0].ids, choice.token);
      }
      return choice;
    }
    case Kind::kSparse: {
      std::vector<TokenDistribution> dists = logits_->warp(sampling_);
      if (comm_.is_root()) {
        choice.token = draw_from(dists[0], uniform());
        choice.confidence = dists[0].probs.front();
        if (max_alternatives_ > 0)
          choice.alternatives = alternatives_from(dists[0].ids, choice.token);
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
        choice.token = drawn.id;
        choice.confidence = stats[0].top_probability();
        q_token_logit_.push_back(drawn.logit);
        q_stats_.push_back(std::move(stats[0]));
      }
      return choice;
    }
  }
  return choice;
}

std::vector<std::int32_t> TokenPicker::alternatives_from(std::span<const std::int32_t> ranked,
                                                         std::int32_t drawn) const {
  std::vector<std::int32_t> alternatives;
  for (const std::int32_t id : ranked) {
    if (static_cast<int>(alternatives.size()) == max_alternatives_) break;
    if (id != drawn) alternatives.push_back(id);
  }
  return alternatives;
}

Verdict TokenPicker::verify(const LogitRows& rows, const Draft& draft) {
  Verdict verdict;
  if (draft.empty()) {
    verdict.next_token = next_token(rows);
    return verdict;
  }
  const std::span<const std::int32_t> drafted = draft.tokens();
  const auto k = static_cast<std::int64_t>(drafted.size());
  set_rows(rows, k + 1);
  if (draft.from_lookup() && kind_ != Kind::kGreedy) {
    SELFSPEC_CHECK(kind_ == Kind::kSparse,
                   "verify: a lookup draft under sampling needs a picker made for point-mass "
                   "drafts");
    walk_lookup_sampled(draft, verdict);
    return verdict;
  }
  // A chain with sourced nodes (a lookup branch that continued the model's chain) holds point
  // masses, which the tree walk tests as such.
  if (!draft.is_chain() || (draft.sourced() > 0 && kind_ != Kind::kGreedy)) {
    SELFSPEC_CHECK(kind_ != Kind::kDense,
                   "verify: a token tree or a sourced branch needs a picker made for trees or "
                   "point-mass drafts");
    if (kind_ == Kind::kGreedy) {
      walk_tree_greedy(draft, verdict);
    } else {
      walk_tree_sampled(draft, verdict);
    }
    return verdict;
  }
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

void TokenPicker::walk_tree_greedy(const Draft& draft, Verdict& verdict) {
  const std::vector<std::int32_t> argmax = logits_->row_argmax();
  if (!comm_.is_root()) return;
  int node = Draft::kRoot;
  for (;;) {
    const std::int32_t target = argmax[static_cast<std::size_t>(node + 1)];
    const int child = draft.child_with(node, target);
    if (child == Draft::kRoot) {
      verdict.next_token = target;
      return;
    }
    verdict.accepted.push_back(child);
    node = child;
  }
}

namespace {

// r ← norm(max(0, r − q)) over r's support; false (r unchanged) when nothing is left.
bool subtract(TokenDistribution& r, const TokenDistribution& q) {
  std::unordered_map<std::int32_t, double> q_of;
  for (std::size_t i = 0; i < q.ids.size(); ++i) q_of[q.ids[i]] = q.probs[i];
  TokenDistribution out;
  double mass = 0.0;
  for (std::size_t i = 0; i < r.ids.size(); ++i) {
    const auto it = q_of.find(r.ids[i]);
    const double weight = r.probs[i] - (it == q_of.end() ? 0.0 : it->second);
    if (weight > 0.0) {
      out.ids.push_back(r.ids[i]);
      out.probs.push_back(weight);
      mass += weight;
    }
  }
  if (!(mass > 0.0)) return false;
  for (double& w : out.probs) w /= mass;
  r = std::move(out);
  return true;
}

// r ← r without `id`, renormalised (r keeps `id` when it is all of r's mass).
void remove(TokenDistribution& r, std::int32_t id) {
  double mass = 0.0;
  for (std::size_t i = 0; i < r.ids.size(); ++i) {
    if (r.ids[i] != id) mass += r.probs[i];
  }
  if (!(mass > 0.0)) return;
  TokenDistribution out;
  for (std::size_t i = 0; i < r.ids.size(); ++i) {
    if (r.ids[i] == id) continue;
    out.ids.push_back(r.ids[i]);
    out.probs.push_back(r.probs[i] / mass);
  }
  r = std::move(out);
}

}  // namespace

void TokenPicker::walk_tree_sampled(const Draft& draft, Verdict& verdict) {
  const std::vector<TokenDistribution> p = logits_->warp(sampling_);
  if (!comm_.is_root()) return;
  SELFSPEC_CHECK(static_cast<int>(q_dists_.size()) == draft.drawn(),
                 "verify: {} draft distributions for {} draft steps", q_dists_.size(),
                 draft.drawn());
  // The draft step (q_dists_ index) of every drawn node, in node order.
  std::vector<int> step_of(static_cast<std::size_t>(draft.size()), -1);
  for (int node = 0, step = 0; node < draft.size(); ++node) {
    if (!draft.is_point_mass(node)) step_of[static_cast<std::size_t>(node)] = step++;
  }
  int node = Draft::kRoot;
  for (;;) {
    TokenDistribution r = p[static_cast<std::size_t>(node + 1)];
    int next = Draft::kRoot;
    for (const int child : draft.children(node)) {
      const std::int32_t x = draft.token(child);
      if (draft.is_point_mass(child)) {
        if (uniform() < r.prob_of(x)) {  // a point-mass proposal: accept with probability r(x)
          next = child;
          break;
        }
        remove(r, x);
      } else {
        const TokenDistribution& q =
            q_dists_[static_cast<std::size_t>(step_of[static_cast<std::size_t>(child)])];
        if (uniform() * q.prob_of(x) < r.prob_of(x)) {  // min(1, r(x)/q(x))
          next = child;
          break;
        }
        subtract(r, q);
      }
    }
    if (next == Draft::kRoot) {
      verdict.next_token = draw_from(r, uniform());
      return;
    }
    verdict.accepted.push_back(next);
    node = next;
  }
}

void TokenPicker::walk_lookup_sampled(const Draft& draft, Verdict& verdict) {
  const std::vector<TokenDistribution> p = logits_->warp(sampling_);
  if (!comm_.is_root()) return;
  SELFSPEC_CHECK(draft.is_chain(), "verify: a lookup draft is a chain");
  for (int node = 0; node < draft.size(); ++node) {
    TokenDistribution r = p[static_cast<std::size_t>(node)];
    const std::int32_t x = draft.token(node);
    if (uniform() < r.prob_of(x)) {  // a point-mass proposal: accept with probability r(x)
      verdict.accepted.push_back(node);
      continue;
    }
    remove(r, x);
    verdict.next_token = draw_from(r, uniform());
    return;
  }
  verdict.next_token = draw_from(p[static_cast<std::size_t>(draft.size())], uniform());
}

int TokenPicker::accept_greedy(std::span<const std::int32_t> drafted, std::int32_t& next) {
  const std::vector<std::int32_t> argmax = logits_->row_argmax();
  if (!comm_.is_root()) return 0;
  const auto k = static_cast<int>(drafted.size());
  int accepted = 0;
  while (accepted < k && drafted[static_cast<std::size_t>(accepted)] ==
                             argmax[static_cast<std::size_t>(accepted)]) {
    ++accepted;
  }
  next = argmax[static_cast<std::size_t>(accepted)];
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
  // residual to zero there), in p's order; p itself when the residual has no mass.
  TokenDistribution residual = p[j];
  const double u = uniform();
  next = subtract(residual, q_dists_[j]) ? draw_from(residual, u) : draw_from(p[j], uniform());
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
