#include "speculative/speculative_setup.hpp"

#include "control/acceptance_predictor_file.hpp"
#include "core/error.hpp"
#include "core/human_units.hpp"
#include "core/logging.hpp"
#include "core/weight_format.hpp"
#include "draft/lookup_drafter.hpp"
#include "engine/engine.hpp"
#include "model_io/draft_vocab_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

namespace selfspec {

SpeculativeSetup::SpeculativeSetup(const SpeculativeOptions& options, const CLI::App& command,
                                   const Engine& engine)
    : options_(options), num_layers_(static_cast<int>(engine.config().num_layers)) {
  options_.validate(command);
  kind_ = options_.chosen();
  if (kind_ == nullptr) return;
  kind_->prepare(command, engine.config());
  const std::vector<std::string> controllers = options_.controller_kinds();
  const bool cali =
      std::find(controllers.begin(), controllers.end(), "cali-ts") != controllers.end();
  SELFSPEC_CHECK(!cali || kind_->exit_layer() > 0,
                 "--controller cali-ts needs --spec early-exit (its predictor reads the exit "
                 "head's hidden states)");
  choose_draft_vocabularies(command, engine);
}

SpeculativeSetup::SpeculativeSetup(OwnedOptions owned, const CLI::App& command,
                                   const Engine& engine)
    : SpeculativeSetup(*owned.options, command, engine) {
  owned_ = std::move(owned.options);
}

std::unique_ptr<SpeculativeSetup> SpeculativeSetup::from_arguments(
    const std::vector<std::string>& arguments, const Engine& engine) {
  auto options = std::make_unique<SpeculativeOptions>();
  CLI::App command("self-speculative setup");
  options->add_to(command);
  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());  // CLI11's order
  try {
    command.parse(reversed);
  } catch (const CLI::ParseError& e) {
    fail("self-speculative options '{}': {}", fmt::join(arguments, " "), e.what());
  }
  return std::make_unique<SpeculativeSetup>(OwnedOptions{std::move(options)}, command, engine);
}

void SpeculativeSetup::choose_draft_vocabularies(const CLI::App& command, const Engine& engine) {
  DraftVocabRanking ranking;
  if (command.count("--draft-vocab") > 0) {
    ranking.ids = load_draft_vocab_file(options_.draft_vocab, "--draft-vocab").ids;
    ranking.origin = "--draft-vocab " + options_.draft_vocab;
  } else {
    ranking = kind_->draft_vocab_ranking();
  }
  std::vector<std::optional<std::int64_t>> sizes;
  if (command.count("--draft-vocab-size") > 0) {
    for (const std::int64_t size : parse_draft_vocab_sizes(options_.draft_vocab_size)) {
      sizes.emplace_back(size);
    }
  } else {
    sizes.emplace_back(std::nullopt);  // every ranked id, or the full head without a ranking
  }
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
  if (options_.draft_weights != "none") attach_draft_weights(engine);
  if (!options_.cali_predictor.empty()) {
    predictor_ = load_acceptance_predictor(
        options_.cali_predictor,
        {engine.model_identity(), kind_->exit_layer(), engine.config().hidden_size});
  }
  for (const std::vector<std::int32_t>& ids : vocab_ids_) {
    vocabularies_.push_back(ids.empty() ? nullptr
                                        : std::make_unique<DraftVocabulary>(engine.model(), ids));
  }
}

void SpeculativeSetup::attach_draft_weights(Engine& engine) const {
  const std::optional<WeightFormat> format = parse_weight_format(options_.draft_weights);
  SELFSPEC_CHECK(format.has_value(), "--draft-weights: unknown format '{}'",
                 options_.draft_weights);
  std::optional<DraftWeights> draft;
  engine.with_tensor_source([&](const TensorSource& source) {
    draft = load_draft_weights(source, engine.config(), engine.shard(), *format, engine.backend());
  });
  const Matrix& target = engine.model().weights().layers.front().w_gate;
  if (draft->layers.front().w_gate.format == target.format) {
    log::warn(
        "--draft-weights {}: the model's weights are held in {} already, so the draft reads the "
        "same values as the target (it only costs memory); choose a smaller format",
        options_.draft_weights, weight_format_name(target.format));
  }
  log::info("draft weights: {} in {} (target {} in {})", human_bytes(draft->bytes()),
            options_.draft_weights, human_bytes(engine.model().weights().bytes()),
            weight_format_name(target.format));
  engine.model().attach_draft_weights(std::move(*draft));
}

const DrafterKind& SpeculativeSetup::kind() const {
  SELFSPEC_CHECK(kind_ != nullptr, "self-speculative decoding is off (--spec none)");
  return *kind_;
}

std::unique_ptr<Drafter> SpeculativeSetup::make_drafter(std::uint64_t sampling_seed) const {
  std::unique_ptr<Drafter> drafter = kind().make_drafter(num_layers_, sampling_seed);
  if (options_.lookup == 0) return drafter;
  return std::make_unique<LookupDrafter>(
      std::move(drafter),
      NgramLookupOptions{options_.lookup, options_.lookup_min_ngram, options_.lookup_max_draft});
}

ControllerOptions SpeculativeSetup::controller_options(const std::string& kind,
                                                       std::uint64_t sampling_seed) const {
  ControllerOptions options = options_.controller;
  options.kind = kind;
  options.seed = sampling_seed ^ kControllerSeedSalt;
  options.predictor = predictor_;
  return options;
}

std::unique_ptr<DraftLengthController> SpeculativeSetup::make_controller(
    const std::string& kind, std::uint64_t sampling_seed) const {
  return make_draft_length_controller(controller_options(kind, sampling_seed));
}

GenerationOptions SpeculativeSetup::generation(GenerationOptions generation,
                                               const DraftVocabulary* vocabulary) const {
  generation.tree = TreeWidths::parse(options_.tree, "--tree");
  generation.tree_max_nodes = options_.tree_max_nodes;
  generation.debug_sync = options_.debug_sync;
  generation.draft_vocabulary = vocabulary;
  generation.draft_weights = options_.draft_weights != "none";
  generation.lookup_drafts = options_.lookup > 0;
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
  return options_.describe(num_layers_);
}

}  // namespace selfspec
