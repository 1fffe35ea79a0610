#include "training_data/exit_data_targets.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "verify/sharded_logits.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace selfspec {
namespace {

// One chunk's forward: its logits (this rank's vocab shard) and the observed exit-layer input.
struct ChunkForward {
  std::vector<float> logits;  // [n × vocab_local]
  std::vector<float> hidden;  // [n × hidden_size]
};

ChunkForward run_chunk(LlamaModel& model, KvCache& kv, std::span<const std::int32_t> tokens,
                       std::int64_t first_position, int exit_layer) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  std::vector<std::int32_t> positions(tokens.size());
  std::iota(positions.begin(), positions.end(), static_cast<std::int32_t>(first_position));
  std::vector<std::int32_t> rows(tokens.size());
  std::iota(rows.begin(), rows.end(), 0);
  ChunkForward out;
  const ForwardObserver observer = [&](std::string_view name, int layer,
                                       std::span<const float> data, std::int64_t n_tokens) {
    if (name == "mlp_out" && layer == exit_layer - 1) {
      SELFSPEC_CHECK(n_tokens == n, "exit-data: observed {} rows of layer {}, expected {}",
                     n_tokens, layer, n);
      out.hidden.assign(data.begin(), data.end());
    }
  };
  ForwardArgs args;
  args.tokens = tokens;
  args.positions = positions;
  args.logit_rows = rows;
  args.observer = &observer;
  model.forward(args, kv, out.logits);
  SELFSPEC_CHECK(out.hidden.size() == static_cast<std::size_t>(n * model.config().hidden_size),
                 "exit-data: the forward did not show layer {}'s output", exit_layer - 1);
  return out;
}

// Root: the first k ids of every row's top-k warp; broadcast so that every rank can look up
// their logits.
std::vector<std::int32_t> top_k_ids(ShardedLogits& logits, Communicator& comm, std::int64_t n,
                                    std::int32_t k) {
  SamplingParams params;
  params.temperature = 1.0;
  params.top_k = k;
  const std::vector<TokenDistribution> dists = logits.warp(params);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n * k), -1);
  if (comm.is_root()) {
    for (std::int64_t r = 0; r < n; ++r) {
      const std::vector<std::int32_t>& row = dists[static_cast<std::size_t>(r)].ids;
      SELFSPEC_CHECK(row.size() >= static_cast<std::size_t>(k),
                     "exit-data: a row has {} candidate tokens, fewer than --top-k {}", row.size(),
                     k);
      std::copy_n(row.begin(), k, ids.begin() + r * k);
    }
  }
  comm.broadcast(std::as_writable_bytes(std::span<std::int32_t>(ids)), 0);
  return ids;
}

// Root: log p(x) for the ids, [n × k], from each column's logits (one collective per column).
std::vector<float> top_k_logprobs(ShardedLogits& logits, const std::vector<RowStats>& stats,
                                  const std::vector<std::int32_t>& ids, std::int64_t n,
                                  std::int32_t k, bool is_root) {
  std::vector<float> logprobs(is_root ? ids.size() : 0);
  std::vector<std::int32_t> column(static_cast<std::size_t>(n));
  for (std::int32_t j = 0; j < k; ++j) {
    for (std::int64_t r = 0; r < n; ++r) column[static_cast<std::size_t>(r)] = ids[r * k + j];
    const std::vector<float> values = logits.logits_of(column);
    if (!is_root) continue;
    for (std::int64_t r = 0; r < n; ++r) {
      const RowStats& s = stats[static_cast<std::size_t>(r)];
      const double logit = values[static_cast<std::size_t>(r)];
      logprobs[static_cast<std::size_t>(r * k + j)] =
          static_cast<float>(logit - s.max - std::log(s.sum_exp));
    }
  }
  return logprobs;
}

}  // namespace

TopKTargets top_k_targets(ShardedLogits& logits, Communicator& comm, std::int64_t n,
                          std::int32_t k) {
  const std::vector<RowStats> stats = logits.row_stats(1.0);
  TopKTargets targets;
  targets.ids = top_k_ids(logits, comm, n, k);
  targets.logprobs = top_k_logprobs(logits, stats, targets.ids, n, k, comm.is_root());
  if (comm.is_root()) {
    for (const RowStats& s : stats) targets.argmax.push_back(s.argmax);
  }
  return targets;
}

ExitDataRows exit_data_targets(LlamaModel& model, Communicator& comm,
                               std::span<const std::int32_t> sequence, std::int64_t sequence_index,
                               const ExitTargetOptions& options) {
  const std::int64_t hidden_size = model.config().hidden_size;
  const std::int32_t k = options.top_k;
  const auto length = static_cast<std::int64_t>(sequence.size());
  SELFSPEC_CHECK(length > 0, "exit-data: sequence {} is empty", sequence_index);
  ExitDataRows rows;
  rows.hidden_size = hidden_size;
  rows.top_k = k;
  KvCache kv = model.make_kv_cache(length);
  const std::unique_ptr<ShardedLogits> logits =
      make_sharded_logits(LogitsMode::kLocal, comm, model.shard(),
                          model.reduction_order() == ReductionOrder::kTpInvariant);
  for (std::int64_t begin = 0; begin < length; begin += options.chunk) {
    const std::int64_t n = std::min(options.chunk, length - begin);
    ChunkForward chunk = run_chunk(
        model, kv, sequence.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(n)),
        begin, options.exit_layer);
    logits->set_rows(chunk.logits, n);
    const TopKTargets targets = top_k_targets(*logits, comm, n, k);
    if (!comm.is_root()) continue;
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t position = begin + r;
      rows.sequence.push_back(static_cast<float>(sequence_index));
      rows.position.push_back(static_cast<float>(position));
      rows.token.push_back(static_cast<float>(sequence[static_cast<std::size_t>(position)]));
      const std::int32_t next = position + 1 < length
                                    ? sequence[static_cast<std::size_t>(position + 1)]
                                    : targets.argmax[static_cast<std::size_t>(r)];
      rows.next_token.push_back(static_cast<float>(next));
    }
    for (const float h : chunk.hidden) rows.hidden.push_back(f32_to_bf16(h));
    for (const std::int32_t id : targets.ids) rows.topk_ids.push_back(static_cast<float>(id));
    rows.topk_logprobs.insert(rows.topk_logprobs.end(), targets.logprobs.begin(),
                              targets.logprobs.end());
  }
  return rows;
}

}  // namespace selfspec
