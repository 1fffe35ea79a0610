#include "training_data/exit_data_collector.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "verify/sharded_logits.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string_view>

namespace selfspec {
namespace {

// Rank 0: one sequence's rows as the passes deliver them (positions in order): the columns every
// exit layer shares, and each layer's hidden rows; next_token is filled once the sequence is
// finished.
struct PartialRows {
  ExitDataRows rows;                                // hidden empty
  std::vector<std::vector<std::uint16_t>> hiddens;  // per exit layer
  std::vector<std::int32_t> argmax;                 // per position
};

class Collection {
 public:
  Collection(LlamaModel& model, Communicator& comm, const ExitDataCollectorOptions& options,
             std::span<const BatchRequest> requests, std::int64_t first_sequence)
      : model_(model),
        comm_(comm),
        options_(options),
        requests_(requests),
        first_sequence_(first_sequence),
        logits_(make_sharded_logits(LogitsMode::kLocal, comm, model.shard(),
                                    model.reduction_order() == ReductionOrder::kTpInvariant)) {}

  // The exit layers' inputs of the current pass's rows.
  ForwardObserver observer() {
    hiddens_.resize(options_.exit_layers.size());
    return [this](std::string_view name, int layer, std::span<const float> data, std::int64_t) {
      if (name != "mlp_out") return;
      for (std::size_t i = 0; i < options_.exit_layers.size(); ++i) {
        if (layer == options_.exit_layers[i] - 1) hiddens_[i].assign(data.begin(), data.end());
      }
    };
  }

  // After a pass: every row's targets (collectives), appended to its sequence's rows on rank 0.
  void add_pass(std::span<const BatchRow> rows, const LogitRows& logits) {
    const auto n = static_cast<std::int64_t>(rows.size());
    const std::int64_t hidden_size = model_.config().hidden_size;
    const std::int32_t k = options_.top_k;
    for (std::size_t i = 0; i < hiddens_.size(); ++i) {
      SELFSPEC_CHECK(hiddens_[i].size() == static_cast<std::size_t>(n * hidden_size),
                     "exit-data: the pass did not show layer {}'s output for its {} rows",
                     options_.exit_layers[i] - 1, n);
    }
    logits_->set_rows(logits);
    const TopKTargets targets = top_k_targets(*logits_, comm_, n, k);
    if (!comm_.is_root()) return;
    for (std::int64_t r = 0; r < n; ++r) {
      const BatchRow& row = rows[static_cast<std::size_t>(r)];
      PartialRows& partial = partial_for(row.request);
      ExitDataRows& out = partial.rows;
      out.sequence.push_back(static_cast<float>(first_sequence_ + row.request));
      out.position.push_back(static_cast<float>(row.position));
      out.token.push_back(static_cast<float>(row.token));
      for (std::size_t l = 0; l < hiddens_.size(); ++l) {
        const float* h = hiddens_[l].data() + r * hidden_size;
        for (std::int64_t i = 0; i < hidden_size; ++i) {
          partial.hiddens[l].push_back(f32_to_bf16(h[i]));
        }
      }
      for (std::int32_t j = 0; j < k; ++j) {
        const auto at = static_cast<std::size_t>(r * k + j);
        out.topk_ids.push_back(static_cast<float>(targets.ids[at]));
        out.topk_logprobs.push_back(targets.logprobs[at]);
      }
      partial.argmax.push_back(targets.argmax[static_cast<std::size_t>(r)]);
    }
  }

  // A finished sequence's rows per exit layer (rank 0; empty elsewhere): next_token is the
  // sequence's next token, at the last position the full model's greedy one.
  std::vector<ExitDataRows> finish(std::int64_t request, const std::vector<std::int32_t>& tokens) {
    if (!comm_.is_root()) return {};
    const auto it = partial_.find(request);
    SELFSPEC_CHECK(it != partial_.end(), "exit-data: request {} finished without rows", request);
    PartialRows partial = std::move(it->second);
    partial_.erase(it);
    ExitDataRows& rows = partial.rows;
    SELFSPEC_CHECK(rows.positions() == static_cast<std::int64_t>(tokens.size()),
                   "exit-data: request {} has {} rows for {} tokens", request, rows.positions(),
                   tokens.size());
    for (std::size_t p = 0; p < tokens.size(); ++p) {
      SELFSPEC_CHECK(rows.position[p] == static_cast<float>(p),
                     "exit-data: request {}'s rows are out of order at {}", request, p);
      rows.next_token.push_back(
          static_cast<float>(p + 1 < tokens.size() ? tokens[p + 1] : partial.argmax[p]));
    }
    std::vector<ExitDataRows> per_layer(partial.hiddens.size(), rows);
    for (std::size_t l = 0; l < per_layer.size(); ++l) {
      per_layer[l].hidden = std::move(partial.hiddens[l]);
    }
    return per_layer;
  }

  std::vector<std::int32_t> tokens_of(std::int64_t request, const BatchResult& result) const {
    std::vector<std::int32_t> tokens = requests_[static_cast<std::size_t>(request)].prompt;
    tokens.insert(tokens.end(), result.tokens.begin(), result.tokens.end());
    return tokens;
  }

 private:
  PartialRows& partial_for(std::int64_t request) {
    auto [it, inserted] = partial_.try_emplace(request);
    if (inserted) {
      it->second.rows.hidden_size = model_.config().hidden_size;
      it->second.rows.top_k = options_.top_k;
      it->second.hiddens.resize(options_.exit_layers.size());
    }
    return it->second;
  }

  LlamaModel& model_;
  Communicator& comm_;
  const ExitDataCollectorOptions& options_;
  std::span<const BatchRequest> requests_;
  std::int64_t first_sequence_;
  std::unique_ptr<ShardedLogits> logits_;
  std::vector<std::vector<float>> hiddens_;  // per exit layer, the current pass's rows
  std::map<std::int64_t, PartialRows> partial_;
};

constexpr std::string_view kExitObservation[] = {"mlp_out"};

}  // namespace

ExitDataCollector::ExitDataCollector(LlamaModel& model, Communicator& comm,
                                     ExitDataCollectorOptions options)
    : model_(model), comm_(comm), options_(std::move(options)) {
  SELFSPEC_CHECK(!options_.exit_layers.empty(), "exit-data: no exit layer to record");
  for (std::size_t i = 0; i < options_.exit_layers.size(); ++i) {
    const int n = options_.exit_layers[i];
    // N = L records the final residual stream (a feature-level head's input, EAGLE §3).
    SELFSPEC_CHECK(n >= 1 && n <= model.config().num_layers,
                   "exit-data: exit layer {} is outside [1, {}]", n, model.config().num_layers);
    SELFSPEC_CHECK(
        std::count(options_.exit_layers.begin(),
                   options_.exit_layers.begin() + static_cast<std::ptrdiff_t>(i), n) == 0,
        "exit-data: exit layer {} is listed twice", n);
  }
}

bool ExitDataCollector::run(std::span<const BatchRequest> requests, std::int64_t first_sequence,
                            const SequenceCallback& on_sequence) {
  Collection collection(model_, comm_, options_, requests, first_sequence);
  const ForwardObserver observer = collection.observer();
  BatchGeneratorOptions generation;
  generation.batch = options_.batch;
  generation.pass_tokens = std::max(options_.chunk, options_.batch);
  generation.eos_ids = options_.eos_ids;
  generation.feed_last = true;
  generation.all_logit_rows = true;
  generation.observer = &observer;
  generation.observe_only = kExitObservation;
  BatchGenerator generator(model_, comm_, generation);
  const bool finished = generator.run(
      requests,
      [&](std::span<const BatchRow> rows, const LogitRows& logits) {
        collection.add_pass(rows, logits);
      },
      [&](std::int64_t request, BatchResult&& result) {
        std::vector<std::int32_t> tokens = collection.tokens_of(request, result);
        std::vector<ExitDataRows> rows = collection.finish(request, tokens);
        return on_sequence(request, std::move(tokens), std::move(rows));
      });
  stats_ = generator.stats();
  return finished;
}

}  // namespace selfspec
