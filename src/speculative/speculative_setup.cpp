#include "speculative/speculative_setup.hpp"

#include "control/acceptance_predictor_file.hpp"
#include "core/error.hpp"
#include "core/human_units.hpp"
#include "core/logging.hpp"
#include "core/weight_format.hpp"
#include "draft/lookup_source.hpp"
#include "draft/sourced_drafter.hpp"
#include "engine/engine.hpp"
#include "model_io/draft_vocab_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

namespace selfspec {

SpeculativeSetup::SpeculativeSetup(SpeculativeConfig config, const Engine& engine,
                                   const SpeculativeKinds& kinds)
    : config_(std::move(config)),
      controller_kinds_(kinds.controllers),
      kind_(kinds.drafters.make(config_.drafter)),
      num_layers_(static_cast<int>(engine.config().num_layers)) {
  if (kind_ == nullptr) return;
  kind_->configure(config_.drafter_settings);
  kind_->prepare(engine.config());
  SELFSPEC_CHECK(
      !controller_kinds_->any_needs_predictor(config_.controllers) || kind_->exit_layer() > 0,
      "--controller cali-ts needs --spec early-exit (its predictor reads the exit "
      "head's hidden states)");
  choose_draft_vocabularies(engine);
}

void SpeculativeSetup::choose_draft_vocabularies(const Engine& engine) {
  DraftVocabRanking ranking;
  if (!config_.draft_vocab.file.empty()) {
    ranking.ids = load_draft_vocab_file(config_.draft_vocab.file, "--draft-vocab").ids;
    ranking.origin = "--draft-vocab " + config_.draft_vocab.file;
  } else {
    ranking = kind_->draft_vocab_ranking();
  }
  std::vector<std::optional<std::int64_t>> sizes;
  for (const std::int64_t size : config_.draft_vocab.sizes) sizes.emplace_back(size);
  if (sizes.empty()) sizes.emplace_back(std::nullopt);  // every ranked id, or the full head
  const std::vector<std::int32_t> eos = engine.eos_ids();
  for (const std::optional<std::int64_t>& size : sizes) {
    if (size == 0 || (!size && ranking.ids.empty())) {
      vocab_ids_.emplace_back();
      continue;
    }
    SELFSPEC_CHECK(!ranking.ids.empty(),
                   "--draft-vocab-size needs a ranking of token ids: --draft-vocab FILE or a "
                   "skip set with draft_vocab");
    vocab_ids_.push_back(select_draft_vocab(ranking.ids, size, eos, engine.config().vocab_size,
                                            "--draft-vocab-size", ranking.origin));
  }
}

void SpeculativeSetup::attach(Engine& engine) {
  if (kind_ == nullptr) return;
  kind_->attach(engine);
  if (config_.draft_weights != "none") attach_draft_weights(engine);
  if (!config_.cali_predictor.empty()) {
    predictor_ = load_acceptance_predictor(
        config_.cali_predictor,
        {engine.model_identity(), kind_->exit_layer(), engine.config().hidden_size});
  }
  for (const std::vector<std::int32_t>& ids : vocab_ids_) {
    vocabularies_.push_back(ids.empty() ? nullptr
                                        : std::make_unique<DraftVocabulary>(engine.model(), ids));
  }
}

void SpeculativeSetup::attach_draft_weights(Engine& engine) const {
  const std::optional<WeightFormat> format = parse_weight_format(config_.draft_weights);
  SELFSPEC_CHECK(format.has_value(), "--draft-weights: unknown format '{}'", config_.draft_weights);
  std::optional<DraftWeights> draft;
  engine.with_tensor_source([&](const TensorSource& source) {
    draft = load_draft_weights(source, engine.config(), engine.shard(), *format, engine.backend());
  });
  const Matrix& target = engine.model().weights().layers.front().w_gate;
  if (draft->layers.front().w_gate.format == target.format) {
    log::warn(
        "--draft-weights {}: the model's weights are held in {} already, so the draft reads the "
        "same values as the target (it only costs memory); choose a smaller format",
        config_.draft_weights, weight_format_name(target.format));
  }
  log::info("draft weights: {} in {} (target {} in {})", human_bytes(draft->bytes()),
            config_.draft_weights, human_bytes(engine.model().weights().bytes()),
            weight_format_name(target.format));
  engine.model().attach_draft_weights(std::move(*draft));
}

const DrafterKind& SpeculativeSetup::kind() const {
  SELFSPEC_CHECK(kind_ != nullptr, "self-speculative decoding is off (--spec none)");
  return *kind_;
}

std::unique_ptr<Drafter> SpeculativeSetup::make_drafter(std::uint64_t sampling_seed) const {
  std::unique_ptr<Drafter> drafter = kind().make_drafter(num_layers_, sampling_seed);
  if (!config_.lookup.enabled()) return drafter;
  std::vector<std::unique_ptr<DraftSource>> sources;  // tried in order, then the model's draft
  sources.push_back(make_lookup_source(
      {config_.lookup.max_ngram, config_.lookup.min_ngram, config_.lookup.max_draft}));
  return std::make_unique<SourcedDrafter>(
      std::move(sources), std::move(drafter),
      SourcedDrafterOptions{config_.lookup.tree, config_.lookup.min_reach});
}

ControllerOptions SpeculativeSetup::controller_options(const std::string& kind,
                                                       std::uint64_t sampling_seed) const {
  ControllerOptions options = config_.controller;
  options.kind = kind;
  options.seed = sampling_seed ^ kControllerSeedSalt;
  options.predictor = predictor_;
  return options;
}

std::unique_ptr<DraftLengthController> SpeculativeSetup::make_controller(
    const std::string& kind, std::uint64_t sampling_seed, int max_draft_cap) const {
  ControllerOptions options = controller_options(kind, sampling_seed);
  if (max_draft_cap >= 1) options.max_draft = std::min(options.max_draft, max_draft_cap);
  return make_draft_length_controller(options, *controller_kinds_);
}

GenerationOptions SpeculativeSetup::generation(GenerationOptions generation,
                                               const DraftVocabulary* vocabulary) const {
  generation.tree = TreeWidths::parse(config_.tree.widths, "--tree");
  generation.tree_max_nodes = config_.tree.max_nodes;
  generation.debug_sync = config_.debug_sync;
  generation.draft.vocabulary = vocabulary;
  generation.draft.draft_weights = config_.draft_weights != "none";
  return generation;
}

const DraftVocabulary* SpeculativeSetup::draft_vocabulary(std::int64_t size) const {
  for (const auto& v : vocabularies_) {
    if (v != nullptr && v->size() == size) return v.get();
  }
  return nullptr;
}

std::string SpeculativeSetup::label() const {
  return kind().label();
}

const SkipSet* SpeculativeSetup::skip_set() const {
  return kind_ != nullptr ? kind_->skip_set() : nullptr;
}

nlohmann::json SpeculativeSetup::describe() const {
  std::vector<std::string> modes;
  for (const LogitsMode mode : config_.logits) {
    modes.emplace_back(logits_mode_name(mode));
  }
  nlohmann::json out = {{"drafter", config_.drafter},
                        {"controller", fmt::format("{}", fmt::join(config_.controllers, ","))},
                        {"max_draft", config_.controller.max_draft},
                        {"logits", fmt::format("{}", fmt::join(modes, ","))},
                        {"tree", TreeWidths::parse(config_.tree.widths, "--tree").describe()}};
  if (config_.tree.widths != "none") out["tree_max_nodes"] = config_.tree.max_nodes;
  if (config_.draft_weights != "none") out["draft_weights"] = config_.draft_weights;
  if (config_.lookup.enabled()) {
    out["lookup"] = {{"max_ngram", config_.lookup.max_ngram},
                     {"min_ngram", config_.lookup.min_ngram},
                     {"max_draft", config_.lookup.max_draft},
                     {"tree", config_.lookup.tree},
                     {"min_reach", config_.lookup.min_reach}};
  }
  if (kind_ != nullptr) kind_->describe(out, num_layers_);
  return out;
}

}  // namespace selfspec
