#include "control/goodput_sizing.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace selfspec {

void ForwardCostTable::record(std::int64_t rows, double seconds) {
  if (rows < 1 || !(seconds > 0.0)) return;
  const auto [it, fresh] = mean_.try_emplace(rows, seconds);
  if (!fresh) it->second += kWeight * (seconds - it->second);
}

bool ForwardCostTable::near(std::int64_t rows) const {
  const std::int64_t slack = std::max<std::int64_t>(1, rows / 8);
  const auto it = mean_.lower_bound(rows - slack);
  return it != mean_.end() && it->first <= rows + slack;
}

double ForwardCostTable::seconds(std::int64_t rows) const {
  SELFSPEC_CHECK(known(), "a forward cost table asked before any pass was recorded");
  if (rows < 1) return 0.0;
  const auto line = [](std::int64_t x, std::pair<std::int64_t, double> a,
                       std::pair<std::int64_t, double> b) {
    const double slope = (b.second - a.second) / static_cast<double>(b.first - a.first);
    return a.second + slope * static_cast<double>(x - a.first);
  };
  const auto upper = mean_.lower_bound(rows);
  if (upper != mean_.end() && upper->first == rows) return upper->second;
  if (mean_.size() == 1) {
    // One count seen: no slope yet. Below it, a pass costs as much (bandwidth-bound); above it,
    // in proportion to its rows (compute-bound), the cautious guess.
    const auto& [seen, cost] = *mean_.begin();
    return rows < seen ? cost : cost * static_cast<double>(rows) / static_cast<double>(seen);
  }
  double estimate = 0.0;
  if (upper == mean_.begin()) {
    estimate = line(rows, *upper, *std::next(upper));
  } else if (upper == mean_.end()) {
    estimate = line(rows, *std::prev(upper, 2), *std::prev(upper));
  } else {
    estimate = line(rows, *std::prev(upper), *upper);
  }
  // Never below the cheapest pass seen: a forward streams the weights whatever its rows.
  double floor = mean_.begin()->second;
  for (const auto& [count, cost] : mean_) floor = std::min(floor, cost);
  return std::max(estimate, floor);
}

double expected_round_tokens(double acceptance, int drafts) {
  const double a = std::clamp(acceptance, 0.0, 1.0);
  if (drafts <= 0) return 1.0;
  if (a >= 1.0) return static_cast<double>(drafts) + 1.0;
  return (1.0 - std::pow(a, drafts + 1)) / (1.0 - a);
}

double step_goodput(std::span<const DraftOutlook> sequences, std::span<const int> drafts,
                    std::int64_t plain_rows, const ForwardCostTable& draft,
                    const ForwardCostTable& full) {
  SELFSPEC_CHECK(sequences.size() == drafts.size(), "{} draft lengths for {} sequences",
                 drafts.size(), sequences.size());
  double tokens = static_cast<double>(plain_rows);
  std::int64_t rows = plain_rows;
  int deepest = 0;
  for (std::size_t b = 0; b < sequences.size(); ++b) {
    tokens += expected_round_tokens(sequences[b].acceptance(), drafts[b]);
    rows += drafts[b] + 1;
    deepest = std::max(deepest, drafts[b]);
  }
  double seconds = full.seconds(rows);
  for (int j = 1; j <= deepest; ++j) {
    const auto drafting =
        std::count_if(drafts.begin(), drafts.end(), [j](int k) { return k >= j; });
    // No draft forward seen yet (drafts from lookups alone, or none drafted so far): free.
    seconds += draft.known() ? draft.seconds(drafting) : 0.0;
  }
  return seconds > 0.0 ? tokens / seconds : 0.0;
}

std::vector<int> GoodputSizer::size(std::span<const DraftOutlook> sequences,
                                    std::int64_t plain_rows) {
  std::vector<int> best(sequences.size());
  std::transform(sequences.begin(), sequences.end(), best.begin(),
                 [](const DraftOutlook& s) { return std::max(0, s.max_draft); });
  if (sequences.empty() || !full_.known()) return best;
  // The plain step's pass measured first; the first sized step after it explores.
  if (!full_.near(plain_rows + static_cast<std::int64_t>(sequences.size()))) {
    return std::vector<int>(sequences.size(), 0);
  }
  std::vector<int> chosen = optimum(sequences, plain_rows);
  const bool drafting = std::any_of(chosen.begin(), chosen.end(), [](int k) { return k > 0; });
  if (drafting) explore_every_ = kExploreEvery;
  const bool first = explored_ == 0;
  if (++since_explored_ >= explore_every_ || first) {
    // One sequence in turn drafts its K: the costs of longer passes and its α stay current.
    since_explored_ = 0;
    if (!drafting && !first) {
      explore_every_ = std::min<std::int64_t>(2 * explore_every_, kExploreMost);
    }
    const std::size_t b = static_cast<std::size_t>(explored_++) % sequences.size();
    chosen[b] = best[b];
  }
  return chosen;
}

std::vector<int> GoodputSizer::optimum(std::span<const DraftOutlook> sequences,
                                       std::int64_t plain_rows) const {
  std::vector<int> best(sequences.size(), 0);

  // Depth d: every sequence drafts min(d, K_b); then each sequence, least likely to be accepted
  // first, keeps the length (at most its depth) that helps the step most.
  std::vector<std::size_t> by_acceptance(sequences.size());
  for (std::size_t b = 0; b < by_acceptance.size(); ++b) by_acceptance[b] = b;
  std::stable_sort(by_acceptance.begin(), by_acceptance.end(), [&](std::size_t a, std::size_t b) {
    return sequences[a].acceptance() < sequences[b].acceptance();
  });
  int deepest = 0;
  for (const DraftOutlook& s : sequences) deepest = std::max(deepest, s.max_draft);
  double best_goodput = step_goodput(sequences, best, plain_rows, draft_, full_);
  std::vector<int> drafts(sequences.size());
  for (int d = 1; d <= deepest; ++d) {
    for (std::size_t b = 0; b < sequences.size(); ++b) {
      drafts[b] = std::min(d, std::max(0, sequences[b].max_draft));
    }
    double goodput = step_goodput(sequences, drafts, plain_rows, draft_, full_);
    for (std::size_t b : by_acceptance) {
      const int current = drafts[b];
      for (int k = 0; k < current; ++k) {
        const int kept = drafts[b];
        drafts[b] = k;
        const double trial = step_goodput(sequences, drafts, plain_rows, draft_, full_);
        if (trial > goodput) {
          goodput = trial;
        } else {
          drafts[b] = kept;
        }
      }
    }
    if (goodput > best_goodput) {
      best_goodput = goodput;
      best = drafts;
    }
  }
  return best;
}

void GoodputSizer::record_pass(bool draft, std::int64_t rows, double seconds) {
  (draft ? draft_ : full_).record(rows, seconds);
}

}  // namespace selfspec
