#include "launch/report.hpp"

#include "draft/draft.hpp"
#include "draft/verdict.hpp"

#include "control/acceptance_predictor.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace selfspec::launch {

std::string main_weight_format(const LlamaWeights& weights) {
  const std::map<std::string, std::uint64_t> by_format = weights.bytes_by_format();
  const auto largest =
      std::max_element(by_format.begin(), by_format.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  return largest == by_format.end() ? "" : largest->first;
}

namespace {

nlohmann::json to_json(const IndexRange& range) {
  return {range.begin, range.end};
}

}  // namespace

nlohmann::json to_json(const SamplingParams& sampling) {
  return {{"temperature", sampling.temperature},
          {"top_k", sampling.top_k},
          {"top_p", sampling.top_p},
          {"seed", sampling.seed}};
}

nlohmann::json to_json(const RoundReport& round) {
  const Draft& draft = round.draft;
  const Verdict& verdict = round.verdict;
  return {
      {"round", round.round},
      {"drafted", draft.size()},
      {"accepted", verdict.accepted_count()},
      {"emitted", round.emitted},
      {"draft_tokens", std::vector<std::int32_t>(draft.tokens().begin(), draft.tokens().end())},
      {"parents", std::vector<int>(draft.parents().begin(), draft.parents().end())},
      {"accepted_nodes", verdict.accepted},
      {"confidences", std::vector<double>(draft.confidences().begin(), draft.confidences().end())},
      {"next_token", verdict.next_token},
      {"controller", round.controller_state},
      {"plan", round.plan}};
}

nlohmann::json to_json(const GenerationTimings& timings) {
  return {{"prefill_s", timings.prefill_seconds},
          {"decode_s", timings.decode_seconds},
          {"prefill_tokens_per_s", timings.prefill_tokens_per_second()},
          {"decode_tokens_per_s", timings.decode_tokens_per_second()},
          {"decode_forwards", timings.decode_forwards},
          {"comm_s", timings.comm_seconds}};
}

nlohmann::json to_json(const PhaseTimes& phases, PhaseKeys keys) {
  const std::string suffix = keys == PhaseKeys::kSuffixed ? "_s" : "";
  return {{"draft" + suffix, phases.draft_s},
          {"verify" + suffix, phases.verify_s},
          {"control" + suffix, phases.control_s},
          {"comm" + suffix, phases.comm_s}};
}

nlohmann::json to_json(const DecodingStats& stats, PhaseKeys keys) {
  return {{"acceptance_rate", stats.acceptance_rate()},
          {"mean_accepted_length", stats.mean_accepted_length()},
          {"drafted", stats.drafted},
          {"accepted", stats.accepted},
          {"alternatives", stats.alternatives},
          {"alternatives_accepted", stats.alternatives_accepted},
          {"draft_forwards", stats.draft_forwards},
          {"verify_forwards", stats.verify_forwards},
          {"score_forwards", stats.score_forwards},
          {"score_forward_s", stats.score_forward_s},
          {keys == PhaseKeys::kSuffixed ? "phases" : "phases_s", to_json(stats.phases, keys)}};
}

nlohmann::json to_json(const MemoryBandwidth& bandwidth) {
  return {{"read_per_rank", bandwidth.read_gbps},
          {"read_all_ranks", bandwidth.aggregate_read_gbps},
          {"copy_all_ranks", bandwidth.aggregate_copy_gbps},
          {"buffer_bytes_per_rank", bandwidth.buffer_bytes}};
}

nlohmann::json to_json(const ControllerOptions& controller) {
  return {{"max_draft", controller.max_draft},
          {"threshold", controller.threshold},
          {"gamma0", controller.gamma0},
          {"epsilon", controller.epsilon},
          {"beta1", controller.beta1},
          {"beta2", controller.beta2},
          {"target_acceptance", controller.target_acceptance},
          {"prior_alpha", controller.prior_alpha},
          {"prior_beta", controller.prior_beta},
          {"cali_sigma_m", controller.sigma_m < 0 && controller.predictor != nullptr
                               ? controller.predictor->sigma_m()
                               : controller.sigma_m},
          {"cali_sigma_s", controller.sigma_s},
          {"cali_theta0", controller.theta0}};
}

nlohmann::json to_json(const RankPlan& rank) {
  nlohmann::json row = {{"rank", rank.rank()},
                        {"q_heads", to_json(rank.shard.q_heads)},
                        {"kv_heads", to_json(rank.shard.kv_heads)},
                        {"intermediate", to_json(rank.shard.intermediate)},
                        {"vocab", to_json(rank.shard.vocab)},
                        {"weight_bytes", rank.memory.weight_bytes},
                        {"weight_bytes_by_format", rank.memory.weight_bytes_by_format},
                        {"kv_cache_bytes", rank.memory.kv_cache_bytes}};
  if (rank.draft_weight_bytes > 0) row["draft_weight_bytes"] = rank.draft_weight_bytes;
  if (rank.workspace_bytes) {
    row["workspace_bytes"] = *rank.workspace_bytes;
    row["total_bytes"] = rank.total_bytes();
  }
  return row;
}

nlohmann::json geometry_json(const ModelConfig& config) {
  return {{"layers", config.num_layers},
          {"hidden_size", config.hidden_size},
          {"intermediate_size", config.intermediate_size},
          {"attention_heads", config.num_heads},
          {"kv_heads", config.num_kv_heads},
          {"head_dim", config.head_dim},
          {"vocab_size", config.vocab_size},
          {"max_position_embeddings", config.max_position_embeddings}};
}

}  // namespace selfspec::launch
