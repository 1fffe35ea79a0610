#include "launch/spec_options.hpp"

#include "core/error.hpp"
#include "decode/control_message.hpp"
#include "draft/cosine_skip_drafter.hpp"
#include "draft/early_exit_drafter.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "launch/acceptance_predictor_file.hpp"
#include "launch/draft_vocab_file.hpp"
#include "launch/list_options.hpp"
#include "launch/options.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>

namespace selfspec::launch {

namespace {

// --draft-vocab-size: one count (or, with lists, comma-separated counts), each an integer >= 0.
std::vector<std::int64_t> parse_sizes(const std::string& text) {
  std::vector<std::int64_t> sizes;
  for (const std::string& item : split_list(text)) {
    std::int64_t value = -1;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    SELFSPEC_CHECK(error == std::errc{} && end == item.data() + item.size() && value >= 0,
                   "--draft-vocab-size: '{}' is not a token count (an integer >= 0; 0: the full "
                   "LM head)",
                   item);
    sizes.push_back(value);
  }
  return sizes;
}

}  // namespace

std::vector<std::string> SpecCliOptions::controller_kinds() const {
  return split_list(controller.kind);
}

std::vector<LogitsMode> SpecCliOptions::logits_modes() const {
  std::vector<LogitsMode> modes;
  for (const std::string& item : split_list(logits)) {
    modes.push_back(item == "gather" ? LogitsMode::kGather : LogitsMode::kLocal);
  }
  return modes;
}

void SpecCliOptions::add_to(CLI::App& command, bool lists) {
  auto* group = command.add_option_group("self-speculative decoding");
  group
      ->add_option("--spec", spec,
                   "drafting method: none (autoregressive), layer-skip (a fixed skip set), swift "
                   "(SWIFT's on-the-fly skip-set search), asd (Draft on the Fly: a skip set per "
                   "prompt from its cosine similarities) or early-exit (the first N layers and a "
                   "trained exit head, --exit-head)")
      ->check(CLI::IsMember({"none", "layer-skip", "swift", "asd", "early-exit"}))
      ->capture_default_str();
  group
      ->add_option("--skip-config", skip_config,
                   "skip set file (YAML/JSON {attention: [...], mlp: [...]}, configs/skips/)")
      ->check(CLI::ExistingFile);
  group
      ->add_option("--exit-head", exit_head,
                   "early-exit: the exit head file (scripts/train_exit_head.py, or a collection's "
                   "init_layer.safetensors); N is read from it")
      ->check(CLI::ExistingFile);
  group->add_option("--skip-attn", skip_attn, "attention sublayers to skip, e.g. 3,5,9");
  group->add_option("--skip-mlp", skip_mlp, "MLP sublayers to skip, e.g. 6,10");
  group
      ->add_option("--skip-uniform", skip_uniform,
                   "skip this fraction of the 2L sublayers, spread uniformly (SWIFT's start)")
      ->check(CLI::Range(0.0, 0.99));
  group
      ->add_option("--asd-alpha", asd.alpha,
                   "asd: skip attention sublayers whose average input/output cosine over the "
                   "prompt is >= alpha, in (0, 1)")
      ->capture_default_str();
  group->add_option("--asd-m", asd.m, "asd: also skip every m-th layer (1-based), m >= 1")
      ->capture_default_str();
  group->add_option("--asd-n", asd.n, "asd: never skip the last n layers, n >= 0")
      ->capture_default_str();
  group
      ->add_option("--controller", controller.kind,
                   lists ? "draft-length controllers to compare (comma-separated)"
                         : "draft-length controller")
      ->check(member_or_list({"fixed", "threshold", "adaptive", "thompson", "cali-ts"}, lists))
      ->capture_default_str();
  add_max_draft_option(*group, controller.max_draft);
  group
      ->add_option("--threshold", controller.threshold,
                   "threshold controller: stop drafting below this draft confidence")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group->add_option("--gamma0", controller.gamma0, "adaptive controller: initial threshold γ0")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group->add_option("--epsilon", controller.epsilon, "adaptive controller: step ε")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  group->add_option("--beta1", controller.beta1, "adaptive controller: AR smoothing β1")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group->add_option("--beta2", controller.beta2, "adaptive controller: γ smoothing β2")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group
      ->add_option("--target-acceptance", controller.target_acceptance,
                   "adaptive controller: target acceptance rate α")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group->add_option("--prior-alpha", controller.prior_alpha, "thompson controller: Beta prior α0")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  group->add_option("--prior-beta", controller.prior_beta, "thompson controller: Beta prior β0")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  group
      ->add_option("--cali-predictor", cali_predictor,
                   "cali-ts controller: the acceptance predictor (scripts/train_exit_head.py "
                   "--predictor)")
      ->check(CLI::ExistingFile);
  group
      ->add_option("--cali-sigma-m", controller.sigma_m,
                   "cali-ts controller: σ_M, the prediction's error (default: the predictor's "
                   "held-out error)")
      ->check(CLI::PositiveNumber);
  group
      ->add_option("--cali-sigma-s", controller.sigma_s,
                   "cali-ts controller: σ_S, the per-round acceptance mean's deviation")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  group->add_option("--cali-theta0", controller.theta0, "cali-ts controller: the prior θ̂_0")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group
      ->add_option("--logits", logits,
                   "how rank 0 reads vocab-sharded logits: local (reductions; only scalars "
                   "cross ranks) or gather (whole rows)")
      ->check(member_or_list({"gather", "local"}, lists))
      ->capture_default_str();
  group->add_option("--swift-ratio", swift.skip_ratio, "swift: share r of the 2L sublayers skipped")
      ->capture_default_str();
  group->add_option("--swift-window", swift.window, "swift: tokens γ matchness is scored over")
      ->capture_default_str();
  group
      ->add_option("--swift-bayes-every", swift.bayes_every,
                   "swift: a Bayesian step every β optimisation steps (random ones between)")
      ->capture_default_str();
  group->add_option("--swift-max-steps", swift.max_steps, "swift: most optimisation steps S")
      ->capture_default_str();
  group
      ->add_option("--swift-patience", swift.patience,
                   "swift: steps without improvement before the search stops")
      ->capture_default_str();
  group
      ->add_option("--swift-stop", swift.stop_matchness,
                   "swift: the search stops once the best set's matchness reaches this")
      ->capture_default_str();
  group
      ->add_option("--swift-min-window", swift.min_window,
                   "swift: tokens the target must have produced before the first step")
      ->capture_default_str();
  group
      ->add_option("--draft-vocab", draft_vocab,
                   "draft forwards compute the LM head over these token ids only (a file of "
                   "`selfspec count-vocab`; verification keeps the full head)")
      ->check(CLI::ExistingFile);
  group->add_option("--draft-vocab-size", draft_vocab_size,
                    lists ? "keep the N most frequent ids of the draft vocabulary (EOS always "
                            "kept; 0: the full head); a comma-separated list compares them"
                          : "keep the N most frequent ids of the draft vocabulary (EOS always "
                            "kept; 0: the full head)");
  group
      ->add_option("--tree", tree,
                   "draft token trees: each draft step is verified with its next most likely "
                   "tokens too, more of them where the draft is unsure (SWIFT's dynamic "
                   "verification). none (chains), swift (k = 10/5/3/1 for confidence up to "
                   "0.5/0.8/0.95/1) or bins UPPER:K,... (e.g. 0.5:4,1:1)")
      ->capture_default_str();
  group
      ->add_option("--tree-max-nodes", tree_max_nodes,
                   "most draft nodes per round's tree (the verification forward's rows)")
      ->check(CLI::Range(1, ControlMessage::kMaxTokens - 1))
      ->capture_default_str();
  group->add_flag("--debug-sync", debug_sync,
                  "check after every control message that all ranks agree (fails loudly)");
  group->add_option("--trace", trace, "write one JSON line per speculative round to this file");
}

void SpecCliOptions::validate(const CLI::App& command) const {
  const bool file = command.count("--skip-config") > 0;
  const bool lists = command.count("--skip-attn") > 0 || command.count("--skip-mlp") > 0;
  const bool uniform = command.count("--skip-uniform") > 0;
  bool swift_options = false;
  for (const char* name :
       {"--swift-ratio", "--swift-window", "--swift-bayes-every", "--swift-max-steps",
        "--swift-patience", "--swift-stop", "--swift-min-window"}) {
    swift_options = swift_options || command.count(name) > 0;
  }
  SELFSPEC_CHECK(spec == "swift" || !swift_options, "the --swift-... options need --spec swift");
  const bool asd_options = command.count("--asd-alpha") > 0 || command.count("--asd-m") > 0 ||
                           command.count("--asd-n") > 0;
  SELFSPEC_CHECK(spec == "asd" || !asd_options, "--asd-alpha/--asd-m/--asd-n need --spec asd");
  SELFSPEC_CHECK((spec == "early-exit") == (command.count("--exit-head") > 0),
                 "--spec early-exit and --exit-head FILE go together");
  if (!fixed_skip_set()) {
    const char* why = spec == "asd" ? " (--spec asd chooses its skip set per prompt)"
                      : spec == "early-exit"
                          ? " (--spec early-exit drafts with the first N layers and its exit head)"
                      : spec == "swift" ? " (--spec swift chooses its own skip set on the fly; "
                                          "--swift-ratio sets how much it skips)"
                                        : "";
    SELFSPEC_CHECK(!file && !lists && !uniform,
                   "--skip-config/--skip-attn/--skip-mlp/--skip-uniform need --spec layer-skip{}",
                   why);
  } else {
    SELFSPEC_CHECK(
        static_cast<int>(file) + static_cast<int>(lists) + static_cast<int>(uniform) == 1,
        "--spec layer-skip needs exactly one skip set: --skip-config FILE, or "
        "--skip-attn/--skip-mlp LISTS, or --skip-uniform R");
  }
  if (!enabled()) {
    SELFSPEC_CHECK(command.count("--draft-vocab") == 0 && command.count("--draft-vocab-size") == 0,
                   "--draft-vocab/--draft-vocab-size need self-speculative decoding (--spec)");
    SELFSPEC_CHECK(command.count("--tree") == 0 && command.count("--tree-max-nodes") == 0,
                   "--tree/--tree-max-nodes need self-speculative decoding (--spec)");
    return;
  }
  TreeWidths::parse(tree, "--tree");
  if (command.count("--draft-vocab-size") > 0) parse_sizes(draft_vocab_size);
  if (spec == "asd") asd.validate();
  if (spec == "swift") swift.validate();
  const std::vector<std::string> kinds = controller_kinds();
  const bool cali = std::find(kinds.begin(), kinds.end(), "cali-ts") != kinds.end();
  SELFSPEC_CHECK(cali == (command.count("--cali-predictor") > 0),
                 "--controller cali-ts and --cali-predictor FILE go together");
  SELFSPEC_CHECK(!cali || spec == "early-exit",
                 "--controller cali-ts needs --spec early-exit (its predictor reads the exit "
                 "head's hidden states)");
  for (const char* name : {"--cali-sigma-m", "--cali-sigma-s", "--cali-theta0"}) {
    SELFSPEC_CHECK(cali || command.count(name) == 0, "{} needs --controller cali-ts", name);
  }
  for (const std::string& kind : kinds) {
    ControllerOptions checked = controller;
    checked.kind = kind;
    checked.validate();
  }
}

SkipSet SpecCliOptions::skip_set(const CLI::App& command, int num_layers) const {
  SkipSet skips;
  if (command.count("--skip-config") > 0) {
    skips = load_skip_set(skip_config);
  } else if (command.count("--skip-uniform") > 0) {
    skips = uniform_skip_set(num_layers, skip_uniform);
  } else {
    skips.name = "cli";
    skips.source = "--skip-attn/--skip-mlp";
    skips.attention = parse_layer_list(skip_attn, "--skip-attn");
    skips.mlp = parse_layer_list(skip_mlp, "--skip-mlp");
  }
  skips.plan(num_layers);  // range check against this model, naming the set and index
  return skips;
}

void SpecCliOptions::check_for_model(int num_layers) const {
  if (spec == "asd") asd.validate(num_layers);
}

std::unique_ptr<Drafter> SpecCliOptions::make_drafter(const SkipSet* skips, int num_layers,
                                                      std::uint64_t sampling_seed) const {
  if (spec == "asd") return std::make_unique<CosineSkipDrafter>(num_layers, asd);
  if (spec == "early-exit") {
    return std::make_unique<EarlyExitDrafter>(num_layers, read_exit_head_info(exit_head).exit_layer,
                                              exit_head);
  }
  if (spec == "swift") {
    SwiftOptions options = swift;
    options.seed = sampling_seed ^ kSwiftSeedSalt;
    return std::make_unique<SwiftDrafter>(num_layers, options);
  }
  SELFSPEC_CHECK(skips != nullptr, "--spec {} needs a skip set", spec);
  return std::make_unique<LayerSkipDrafter>(skips->plan(num_layers), skips->name);
}

std::string SpecCliOptions::drafter_label(const SkipSet* skips) const {
  if (skips != nullptr) return skips->name;
  if (spec == "swift")
    return fmt::format("swift (r {}, window {})", swift.skip_ratio, swift.window);
  if (spec == "early-exit")
    return fmt::format("early-exit (N {})", read_exit_head_info(exit_head).exit_layer);
  return fmt::format("asd (alpha {}, m {}, n {})", asd.alpha, asd.m, asd.n);
}

ControllerOptions SpecCliOptions::controller_options(const std::string& kind,
                                                     std::uint64_t sampling_seed) const {
  ControllerOptions options = controller;
  options.kind = kind;
  options.seed = sampling_seed ^ kControllerSeedSalt;
  options.predictor = predictor;
  return options;
}

void SpecCliOptions::attach_drafting_files(Engine& engine) const {
  if (spec != "early-exit") return;
  ExitHead head = load_exit_head(exit_head, engine.config(), engine.model_identity(),
                                 engine.shard(), engine.load_dtype(), engine.backend());
  if (!cali_predictor.empty()) {
    predictor = load_acceptance_predictor(
        cali_predictor, {engine.model_identity(), head.exit_layer, engine.config().hidden_size});
  }
  engine.model().attach_exit_head(std::move(head));
}

void SpecCliOptions::apply_tree(GenerationOptions& generation) const {
  generation.tree = TreeWidths::parse(tree, "--tree");
  generation.tree_max_nodes = tree_max_nodes;
}

LogitsMode SpecCliOptions::logits_mode() const {
  return logits == "gather" ? LogitsMode::kGather : LogitsMode::kLocal;
}

std::vector<std::vector<std::int32_t>> SpecCliOptions::draft_vocab_ids(
    const CLI::App& command, const SkipSet* skips, std::int64_t vocab_size,
    std::span<const std::int32_t> eos) const {
  std::vector<std::int32_t> ranked;
  std::string origin;
  if (command.count("--draft-vocab") > 0) {
    ranked = load_draft_vocab_file(draft_vocab, "--draft-vocab").ids;
    origin = "--draft-vocab " + draft_vocab;
  } else if (skips != nullptr && !skips->draft_vocab.empty()) {
    ranked = skips->draft_vocab;
    origin = "the draft_vocab of skip set '" + skips->name + "'";
  }
  std::vector<std::optional<std::int64_t>> sizes;
  if (command.count("--draft-vocab-size") > 0) {
    for (const std::int64_t size : parse_sizes(draft_vocab_size)) sizes.emplace_back(size);
  } else {
    sizes.emplace_back(std::nullopt);  // every ranked id, or the full head without a ranking
  }
  std::vector<std::vector<std::int32_t>> vocabularies;
  for (const std::optional<std::int64_t>& size : sizes) {
    if (size == 0 || (!size && ranked.empty())) {
      vocabularies.emplace_back();
      continue;
    }
    SELFSPEC_CHECK(!ranked.empty(),
                   "--draft-vocab-size needs a ranking of token ids: --draft-vocab FILE or a "
                   "skip set with draft_vocab");
    vocabularies.push_back(
        select_draft_vocab(ranked, size, eos, vocab_size, "--draft-vocab-size", origin));
  }
  return vocabularies;
}

nlohmann::json SpecCliOptions::describe(const SkipSet* skips, int num_layers) const {
  nlohmann::json out = {{"drafter", spec},
                        {"controller", controller.kind},
                        {"max_draft", controller.max_draft},
                        {"logits", logits},
                        {"tree", TreeWidths::parse(tree, "--tree").describe()}};
  if (tree != "none") out["tree_max_nodes"] = tree_max_nodes;
  if (skips != nullptr) {
    const LayerPlan plan = skips->plan(num_layers);
    out["skip_set"] = nlohmann::json::parse(skips->describe());
    out["skipped_sublayers"] = plan.skipped_count();
    out["skip_fraction"] = static_cast<double>(plan.skipped_count()) / (2.0 * num_layers);
  }
  if (spec == "asd") out["asd"] = {{"alpha", asd.alpha}, {"m", asd.m}, {"n", asd.n}};
  if (spec == "early-exit") {
    const ExitHeadInfo info = read_exit_head_info(exit_head);
    out["exit_head"] = {{"file", exit_head}, {"exit_layer", info.exit_layer}};
    for (const char* key : {"trained_on", "heldout_top1_agreement"}) {
      if (info.metadata.count(key) > 0) out["exit_head"][key] = info.metadata.at(key);
    }
  }
  if (spec == "swift") {
    out["swift"] = {{"skip_ratio", swift.skip_ratio},   {"window", swift.window},
                    {"bayes_every", swift.bayes_every}, {"max_steps", swift.max_steps},
                    {"patience", swift.patience},       {"stop_matchness", swift.stop_matchness},
                    {"min_window", swift.min_window}};
  }
  return out;
}

}  // namespace selfspec::launch
