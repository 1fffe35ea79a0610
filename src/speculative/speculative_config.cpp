#include "speculative/speculative_config.hpp"

#include "core/error.hpp"
#include "core/weight_format.hpp"
#include "draft/draft_source.hpp"
#include "draft/tree_widths.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

namespace selfspec {
namespace {

// The settings every drafter kind shares, before the kinds' own and the controllers'.
std::vector<SettingSpec> common_settings(const SpeculativeKinds& kinds) {
  return {
      {.key = "spec",
       .type = SettingType::kChoice,
       .help = kinds.drafters.help(),
       .fallback = "none",
       .choices = kinds.drafters.choices()},
      kinds.controllers->kind_setting(),
      max_draft_setting(),
      {.key = "logits",
       .type = SettingType::kChoice,
       .help = "how rank 0 reads vocab-sharded logits: local (reductions; only scalars cross "
               "ranks) or gather (whole rows)",
       .fallback = "local",
       .choices = {"gather", "local"},
       .list = true},
      {.key = "draft-vocab",
       .type = SettingType::kFile,
       .help = "draft forwards compute the LM head over these token ids only (a file of "
               "`selfspec count-vocab`; verification keeps the full head)"},
      {.key = "draft-vocab-size",
       .type = SettingType::kInt,
       .help = "keep the N most frequent ids of the draft vocabulary (EOS always kept; 0: the "
               "full head)",
       .min = 0,
       .list = true},
      {.key = "draft-weights",
       .type = SettingType::kChoice,
       .help = "draft forwards read a copy of the weights made in this format at load (the model "
               "drafting as itself in fewer bits; combines with skip sets and early exit; "
               "verification keeps the full weights). none, a quantized format or a dense dtype",
       .fallback = "none",
       .choices = weight_format_choices("none")},
      {.key = "lookup",
       .type = SettingType::kInt,
       .help = "lookup drafts: where the last N tokens (N from this down to --lookup-min-ngram) "
               "occurred before in the prompt or output, the tokens that followed are the "
               "round's draft, with no draft forward; other rounds draft with --spec's drafter. "
               "0: off",
       .fallback = 0,
       .min = 0,
       .max = 64},
      {.key = "lookup-min-ngram",
       .type = SettingType::kInt,
       .help = "lookup: the shortest suffix matched",
       .fallback = LookupConfig{}.min_ngram,
       .min = 1,
       .max = 64},
      {.key = "lookup-max-draft",
       .type = SettingType::kInt,
       .help = "lookup: most tokens one lookup drafts (--max-draft bounds the drafter's steps, "
               "not lookups)",
       .fallback = LookupConfig{}.max_draft,
       .min = 1,
       .max = DraftSource::kMaxTokens},
      {.key = "lookup-tree",
       .type = SettingType::kFlag,
       .help = "lookup: the drafter drafts every round and a lookup joins its draft as a branch "
               "of one token tree, verified in one forward (off: a lookup drafts its round "
               "alone, with no draft forward)",
       .fallback = false},
      {.key = "lookup-min-reach",
       .type = SettingType::kNumber,
       .help = "lookup: propose a lookup's next token only while the running estimate of the "
               "chance that the target accepts it and every one before it is at least this",
       .fallback = 0.0,
       .min = 0.0,
       .max = 1.0},
      {.key = "tree",
       .type = SettingType::kText,
       .help = "draft token trees: each draft step is verified with its next most likely tokens "
               "too, more of them where the draft is unsure (SWIFT's dynamic verification). none "
               "(chains), swift (k = 10/5/3/1 for confidence up to 0.5/0.8/0.95/1) or bins "
               "UPPER:K,... (e.g. 0.5:4,1:1)",
       .fallback = "none"},
      {.key = "tree-max-nodes",
       .type = SettingType::kInt,
       .help = "most draft nodes per round's tree (the verification forward's rows)",
       .fallback = TreeConfig{}.max_nodes,
       .min = 1,
       .max = kMaxDraftTokens},
      {.key = "debug-sync",
       .type = SettingType::kFlag,
       .help = "check after every control message that all ranks agree (fails loudly)",
       .fallback = false},
  };
}

// "max_draft" -> "max-draft": JSON callers may write keys either way.
std::string normalized_key(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

// Each given setting checked against its declaration and typed.
nlohmann::json checked_settings(const nlohmann::json& settings, SettingSource source,
                                const std::vector<SettingSpec>& specs, bool lists) {
  SELFSPEC_CHECK(settings.is_object(), "speculative settings must be a JSON object (got {})",
                 settings.dump());
  nlohmann::json given = nlohmann::json::object();
  for (const auto& [raw_key, value] : settings.items()) {
    const std::string key = normalized_key(raw_key);
    const SettingSpec* spec = find_setting(specs, key);
    if (spec == nullptr) {
      std::vector<std::string> known;
      for (const SettingSpec& s : specs) known.push_back(s.key);
      fail("{} is not a self-speculative setting (known: {})", setting_name(raw_key, source),
           fmt::join(known, ", "));
    }
    given[key] = parse_setting(*spec, value, source, lists);
  }
  return given;
}

// A setting that may hold several values (with lists) as a vector of one or more.
template <typename T>
std::vector<T> values_of(const nlohmann::json& value) {
  if (value.is_array()) return value.get<std::vector<T>>();
  return {value.get<T>()};
}

LogitsMode logits_mode(const std::string& name) {
  return name == "gather" ? LogitsMode::kGather : LogitsMode::kLocal;
}

nlohmann::json subset(const nlohmann::json& given, const std::vector<SettingSpec>& specs) {
  nlohmann::json out = nlohmann::json::object();
  for (const SettingSpec& spec : specs) {
    if (given.contains(spec.key)) out[spec.key] = given[spec.key];
  }
  return out;
}

// Refuses another kind's settings, naming them and the --spec they need.
void refuse_foreign_drafter_settings(const nlohmann::json& given, const SpeculativeKinds& kinds,
                                     const DrafterKind* chosen) {
  for (const auto& [key, value] : given.items()) {
    const std::string owner = kinds.drafters.owner_of(key);
    if (owner.empty() || (chosen != nullptr && owner == chosen->name())) continue;
    fail("{}{}", kinds.drafters.make(owner)->foreign_options_message(),
         chosen != nullptr ? chosen->declines_others() : std::string_view());
  }
}

void refuse_drafting_settings_without_drafter(const nlohmann::json& given) {
  SELFSPEC_CHECK(!given.contains("draft-vocab") && !given.contains("draft-vocab-size"),
                 "--draft-vocab/--draft-vocab-size need self-speculative decoding (--spec)");
  SELFSPEC_CHECK(!given.contains("tree") && !given.contains("tree-max-nodes"),
                 "--tree/--tree-max-nodes need self-speculative decoding (--spec)");
  SELFSPEC_CHECK(given.value("draft-weights", "none") == "none",
                 "--draft-weights needs self-speculative decoding (--spec)");
  SELFSPEC_CHECK(!given.contains("lookup") && !given.contains("lookup-min-ngram") &&
                     !given.contains("lookup-max-draft") && !given.contains("lookup-tree") &&
                     !given.contains("lookup-min-reach"),
                 "--lookup and its --lookup-* settings need self-speculative decoding "
                 "(--spec: its drafter drafts the rounds without a match)");
}

// --controller and every controller kind's parameters, each kind reading its own.
void read_controllers(const nlohmann::json& given, const ControllerKinds& kinds,
                      SpeculativeConfig& config) {
  config.controllers =
      values_of<std::string>(given.value("controller", nlohmann::json("adaptive")));
  ControllerOptions& options = config.controller;
  options.kind = config.controllers.front();
  options.max_draft = given.value("max-draft", options.max_draft);
  for (const std::string& name : kinds.names()) {
    const ControllerKind& kind = kinds.find(name);
    const nlohmann::json own = subset(given, kind.settings());
    if (!own.empty()) kind.read(own, options);
  }
  config.cali_predictor = given.value("cali-predictor", "");
}

// Cali-TS's predictor goes with it, and settings only one controller reads need that controller.
void check_controllers(const nlohmann::json& given, const ControllerKinds& kinds,
                       const SpeculativeConfig& config) {
  SELFSPEC_CHECK(kinds.any_needs_predictor(config.controllers) == given.contains("cali-predictor"),
                 "--controller cali-ts and --cali-predictor FILE go together");
  for (const auto& [key, value] : given.items()) {
    const ControllerKind* owner = kinds.owner_of(key);
    if (owner == nullptr || !owner->refuses_foreign_settings()) continue;
    const bool chosen = std::find(config.controllers.begin(), config.controllers.end(),
                                  owner->name()) != config.controllers.end();
    SELFSPEC_CHECK(chosen, "{} needs --controller {}",
                   setting_name(key, SettingSource::kCommandLine), owner->name());
  }
  for (const std::string& name : config.controllers) {
    ControllerOptions checked = config.controller;
    checked.kind = name;
    checked.validate();
  }
}

void read_drafting(const nlohmann::json& given, SpeculativeConfig& config) {
  config.lookup.max_ngram = given.value("lookup", config.lookup.max_ngram);
  config.lookup.min_ngram = given.value("lookup-min-ngram", config.lookup.min_ngram);
  config.lookup.max_draft = given.value("lookup-max-draft", config.lookup.max_draft);
  config.lookup.tree = given.value("lookup-tree", config.lookup.tree);
  config.lookup.min_reach = given.value("lookup-min-reach", config.lookup.min_reach);
  config.draft_weights = given.value("draft-weights", config.draft_weights);
  config.draft_vocab.file = given.value("draft-vocab", "");
  if (given.contains("draft-vocab-size")) {
    config.draft_vocab.sizes = values_of<std::int64_t>(given["draft-vocab-size"]);
  }
  config.tree.widths = given.value("tree", config.tree.widths);
  config.tree.max_nodes = given.value("tree-max-nodes", config.tree.max_nodes);
  SELFSPEC_CHECK(config.lookup.max_ngram == 0 || config.lookup.max_ngram >= config.lookup.min_ngram,
                 "--lookup {} is shorter than --lookup-min-ngram {}", config.lookup.max_ngram,
                 config.lookup.min_ngram);
  SELFSPEC_CHECK(config.lookup.enabled() ||
                     (!given.contains("lookup-tree") && !given.contains("lookup-min-reach")),
                 "--lookup-tree and --lookup-min-reach shape lookup drafts: they need --lookup N");
  TreeWidths::parse(config.tree.widths, "--tree");
}

}  // namespace

bool SpeculativeConfig::quantized_draft_weights() const {
  const std::optional<WeightFormat> format = parse_weight_format(draft_weights);
  return format.has_value() && is_quantized(*format);
}

std::vector<SettingSpec> speculative_settings(const SpeculativeKinds& kinds) {
  std::vector<SettingSpec> specs = common_settings(kinds);
  for (SettingSpec& spec : kinds.drafters.settings()) specs.push_back(std::move(spec));
  for (SettingSpec& spec : kinds.controllers->settings()) specs.push_back(std::move(spec));
  return specs;
}

SpeculativeConfig speculative_config(const nlohmann::json& settings, SettingSource source,
                                     const SpeculativeKinds& kinds, bool lists) {
  const std::vector<SettingSpec> specs = speculative_settings(kinds);
  const nlohmann::json given = checked_settings(settings, source, specs, lists);
  SpeculativeConfig config;
  config.drafter = given.value("spec", config.drafter);
  const std::unique_ptr<DrafterKind> kind = kinds.drafters.make(config.drafter);
  refuse_foreign_drafter_settings(given, kinds, kind.get());
  read_controllers(given, *kinds.controllers, config);
  config.logits.clear();
  for (const std::string& name :
       values_of<std::string>(given.value("logits", nlohmann::json("local")))) {
    config.logits.push_back(logits_mode(name));
  }
  config.debug_sync = given.value("debug-sync", false);
  if (kind == nullptr) {
    refuse_drafting_settings_without_drafter(given);
    return config;
  }
  config.drafter_settings = subset(given, kind->settings());
  kind->configure(config.drafter_settings);
  SELFSPEC_CHECK(!kind->needs_lookup() || given.contains("lookup"),
                 "--spec {} drafts with --lookup N (the longest n-gram matched, e.g. 3)",
                 kind->name());
  read_drafting(given, config);
  SELFSPEC_CHECK(!config.lookup.tree || !kind->needs_lookup(),
                 "--lookup-tree grafts lookups onto the drafter's own draft, and --spec {} drafts "
                 "nothing of its own (leave --lookup-tree out)",
                 kind->name());
  check_controllers(given, *kinds.controllers, config);
  return config;
}

nlohmann::json SpeculativeConfig::to_json() const {
  nlohmann::json out = {{"spec", drafter}};
  out.update(drafter_settings);
  out["controller"] =
      controllers.size() == 1 ? nlohmann::json(controllers.front()) : nlohmann::json(controllers);
  out["max-draft"] = controller.max_draft;
  const ControllerKinds& kinds = builtin_controller_kinds();
  for (const std::string& name : kinds.names()) {
    const ControllerKind& kind = kinds.find(name);
    const bool chosen =
        std::find(controllers.begin(), controllers.end(), name) != controllers.end();
    if (chosen || !kind.refuses_foreign_settings()) out.update(kind.write(controller));
  }
  out.update(controller.params);
  if (!cali_predictor.empty()) out["cali-predictor"] = cali_predictor;
  std::vector<std::string> modes;
  for (const LogitsMode mode : logits) modes.emplace_back(logits_mode_name(mode));
  out["logits"] = modes.size() == 1 ? nlohmann::json(modes.front()) : nlohmann::json(modes);
  if (debug_sync) out["debug-sync"] = true;
  if (!enabled()) return out;
  out["lookup"] = lookup.max_ngram;
  out["lookup-min-ngram"] = lookup.min_ngram;
  out["lookup-max-draft"] = lookup.max_draft;
  if (lookup.enabled()) {
    out["lookup-tree"] = lookup.tree;
    out["lookup-min-reach"] = lookup.min_reach;
  }
  out["draft-weights"] = draft_weights;
  if (!draft_vocab.file.empty()) out["draft-vocab"] = draft_vocab.file;
  if (!draft_vocab.sizes.empty()) {
    out["draft-vocab-size"] = draft_vocab.sizes.size() == 1 ? nlohmann::json(draft_vocab.sizes[0])
                                                            : nlohmann::json(draft_vocab.sizes);
  }
  out["tree"] = tree.widths;
  out["tree-max-nodes"] = tree.max_nodes;
  return out;
}

}  // namespace selfspec
