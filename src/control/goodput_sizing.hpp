// Draft lengths sized to the load (SmartSpec / TurboSpec, arXiv 2406.14066 §4): in a batch, a
// verification forward stops being nearly free once its rows make it compute-bound, so the draft
// length that pays for one sequence alone can cost the batch more than it brings. Before each
// step, rank 0 chooses every speculating sequence's draft length k_b (0: plain decoding this
// round) to maximise the step's goodput, the expected tokens per second:
//
//   goodput(k) = (Σ_b E(α_b, k_b) + plain rows) / (Σ_{j=1..max k} c_draft(n_j) + c_full(T))
//
// where E(α, k) = (1 − α^{k+1}) / (1 − α) is the expected tokens a round of k drafts emits at
// per-token acceptance α (§4.1, eq. 1: every draft token accepted with probability α, the
// target's own token always), n_j the sequences that draft a j-th token (each draft step is one
// batched draft forward over them), T = Σ (k_b + 1) + plain rows the verification forward's rows,
// and c_draft, c_full the measured seconds of a draft or full forward of that many rows.
//
// α_b is the sequence's running estimate: its accepted draft tokens A over A + R, R the rounds that
// ended in a rejection (the maximum-likelihood α of a truncated geometric acceptance), with one
// success and one failure as prior. The forward costs are measured in the run
// (ForwardCostTable): per row count, a moving average of the passes seen, interpolated between
// the counts seen and extrapolated along the last two; while no draft forward has run (lookup
// drafts need none) drafts cost only their verification rows. Until a full forward has been
// timed, every sequence may draft its controller's full length. Then the plain step's rows are
// measured first (while no pass near them has been timed, the step is plain), and the next step
// explores: one sequence drafts its K, a pass a few rows longer, which gives the table a slope at
// the batch's size. From there the optimum reads the table, extrapolated where no pass has been
// seen: if it says that more drafts pay, the step that drafts them is timed and corrects it.
// (Timing every sequence's full drafts first, as this did before, cost a large batch one pass of 3
// to 4 times the rows, about 2 % of a 64-token run at concurrency 16.) After that, every
// kExploreEvery-th step one sequence in turn drafts its K (so that the costs of longer passes and
// the α of sequences held at 0 stay current). An exploration costs the batch: at concurrency 8 on 2
// cores a step with one sequence's drafts is about a quarter slower for about a tenth more tokens,
// 1 % of the run at one exploration in 16 steps. So while the optimum drafts nothing (speculation
// does not pay under this load), the interval doubles after each exploration, up to kExploreMost
// steps; it is back to kExploreEvery as soon as the optimum drafts for any sequence.
//
// Each sequence's controller still decides within the length given (fixed, thresholds, Thompson
// sampling, Cali-TS): the sizing only caps it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace selfspec {

// Seconds of a forward by its row count, learned from the passes of the run.
class ForwardCostTable {
 public:
  void record(std::int64_t rows, double seconds);
  bool known() const { return !mean_.empty(); }
  // Whether a pass of about `rows` rows has been seen (within an eighth, or one row).
  bool near(std::int64_t rows) const;
  // The cost of a pass of `rows` rows (0 for rows < 1; needs known()).
  double seconds(std::int64_t rows) const;

 private:
  static constexpr double kWeight = 0.25;  // the newest pass's weight in its count's average
  std::map<std::int64_t, double> mean_;
};

struct DraftOutlook {
  std::int64_t accepted = 0;  // draft tokens accepted so far in the request
  std::int64_t rejected = 0;  // rounds that ended in a rejection
  int max_draft = 0;          // the controller's K (the most this round may draft)
  double acceptance() const {
    return (static_cast<double>(accepted) + 1.0) / (static_cast<double>(accepted + rejected) + 2.0);
  }
};

// E(α, k): the expected tokens a round of k draft tokens emits.
double expected_round_tokens(double acceptance, int drafts);

// The step's expected tokens per second for draft lengths `drafts` (one per outlook).
double step_goodput(std::span<const DraftOutlook> sequences, std::span<const int> drafts,
                    std::int64_t plain_rows, const ForwardCostTable& draft,
                    const ForwardCostTable& full);

class GoodputSizer {
 public:
  static constexpr int kExploreEvery = 16;
  static constexpr int kExploreMost = 128;

  // The draft length of every speculating sequence for the next step; plain_rows: the rows of
  // the verification forward that are not speculating sequences' (plain decoding, prefill).
  std::vector<int> size(std::span<const DraftOutlook> sequences, std::int64_t plain_rows);

  // Every pass of the batch, on rank 0: a draft or a full forward of `rows` rows.
  void record_pass(bool draft, std::int64_t rows, double seconds);

 private:
  // The lengths that maximise step_goodput: for each depth d, every sequence at min(d, K_b), then
  // each one (least likely to be accepted first) cut back where that helps the step.
  std::vector<int> optimum(std::span<const DraftOutlook> sequences, std::int64_t plain_rows) const;

  ForwardCostTable draft_, full_;
  std::int64_t explore_every_ = kExploreEvery;  // steps between explorations now
  std::int64_t since_explored_ = 0;             // sized steps since the last exploration
  std::int64_t explored_ = 0;                   // exploration steps so far
};

}  // namespace selfspec
