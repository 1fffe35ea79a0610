#include "speculative/speculative_options.hpp"

#include "core/error.hpp"
#include "core/weight_format.hpp"
#include "decode/control_message.hpp"
#include "draft/tree_widths.hpp"
#include "speculative/list_options.hpp"

#include <algorithm>
#include <charconv>

namespace selfspec {

CLI::Option* add_max_draft_option(CLI::App& command, int& max_draft) {
  return command.add_option("--max-draft", max_draft, "most tokens drafted per round (K)")
      ->check(CLI::Range(1, 63))
      ->capture_default_str();
}

CLI::Option* add_draft_weights_option(CLI::App& command, std::string& draft_weights) {
  return command
      .add_option("--draft-weights", draft_weights,
                  "draft forwards read a copy of the weights made in this format at load (the "
                  "model drafting as itself in fewer bits; combines with skip sets and early "
                  "exit; verification keeps the full weights). none, a quantized format or a "
                  "dense dtype")
      ->check(CLI::IsMember(weight_format_choices("none")))
      ->capture_default_str();
}

std::vector<std::int64_t> parse_draft_vocab_sizes(const std::string& text) {
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

std::vector<std::string> SpeculativeOptions::controller_kinds() const {
  return split_list(controller.kind);
}

std::vector<LogitsMode> SpeculativeOptions::logits_modes() const {
  std::vector<LogitsMode> modes;
  for (const std::string& item : split_list(logits)) {
    modes.push_back(item == "gather" ? LogitsMode::kGather : LogitsMode::kLocal);
  }
  return modes;
}

namespace {

void add_controller_options(CLI::App& group, ControllerOptions& controller, std::string& predictor,
                            bool lists) {
  group
      .add_option("--controller", controller.kind,
                  lists ? "draft-length controllers to compare (comma-separated)"
                        : "draft-length controller")
      ->check(member_or_list({"fixed", "threshold", "adaptive", "thompson", "cali-ts"}, lists))
      ->capture_default_str();
  add_max_draft_option(group, controller.max_draft);
  group
      .add_option("--threshold", controller.threshold,
                  "threshold controller: stop drafting below this draft confidence")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group.add_option("--gamma0", controller.gamma0, "adaptive controller: initial threshold γ0")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group.add_option("--epsilon", controller.epsilon, "adaptive controller: step ε")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  group.add_option("--beta1", controller.beta1, "adaptive controller: AR smoothing β1")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group.add_option("--beta2", controller.beta2, "adaptive controller: γ smoothing β2")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group
      .add_option("--target-acceptance", controller.target_acceptance,
                  "adaptive controller: target acceptance rate α")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  group.add_option("--prior-alpha", controller.prior_alpha, "thompson controller: Beta prior α0")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  group.add_option("--prior-beta", controller.prior_beta, "thompson controller: Beta prior β0")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  group
      .add_option("--cali-predictor", predictor,
                  "cali-ts controller: the acceptance predictor (scripts/train_exit_head.py "
                  "--predictor)")
      ->check(CLI::ExistingFile);
  group
      .add_option("--cali-sigma-m", controller.sigma_m,
                  "cali-ts controller: σ_M, the prediction's error (default: the predictor's "
                  "held-out error)")
      ->check(CLI::PositiveNumber);
  group
      .add_option("--cali-sigma-s", controller.sigma_s,
                  "cali-ts controller: σ_S, the per-round acceptance mean's deviation")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  group.add_option("--cali-theta0", controller.theta0, "cali-ts controller: the prior θ̂_0")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

}  // namespace

void SpeculativeOptions::add_to(CLI::App& command, bool lists, bool with_trace) {
  auto* group = command.add_option_group("self-speculative decoding");
  group->add_option("--spec", spec, kinds.help())
      ->check(CLI::IsMember(kinds.choices()))
      ->capture_default_str();
  kinds.add_options(*group, lists);
  add_controller_options(*group, controller, cali_predictor, lists);
  group
      ->add_option("--logits", logits,
                   "how rank 0 reads vocab-sharded logits: local (reductions; only scalars "
                   "cross ranks) or gather (whole rows)")
      ->check(member_or_list({"gather", "local"}, lists))
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
  add_draft_weights_option(*group, draft_weights);
  group
      ->add_option("--lookup", lookup,
                   "lookup drafts: where the last N tokens (N from this down to "
                   "--lookup-min-ngram) occurred before in the prompt or output, the tokens that "
                   "followed are the round's draft, with no draft forward; other rounds draft "
                   "with --spec's drafter. 0: off")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  group->add_option("--lookup-min-ngram", lookup_min_ngram, "lookup: the shortest suffix matched")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  group
      ->add_option("--lookup-max-draft", lookup_max_draft,
                   "lookup: most tokens one lookup drafts (--max-draft bounds the drafter's "
                   "steps, not lookups)")
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
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
  if (with_trace) {
    group->add_option("--trace", trace, "write one JSON line per speculative round to this file");
  }
}

bool SpeculativeOptions::quantized_draft_weights() const {
  const std::optional<WeightFormat> format = parse_weight_format(draft_weights);
  return format.has_value() && is_quantized(*format);
}

void SpeculativeOptions::validate(const CLI::App& command) const {
  const DrafterKind* kind = chosen();
  kinds.refuse_foreign_options(kind);
  if (kind == nullptr) {
    SELFSPEC_CHECK(command.count("--draft-vocab") == 0 && command.count("--draft-vocab-size") == 0,
                   "--draft-vocab/--draft-vocab-size need self-speculative decoding (--spec)");
    SELFSPEC_CHECK(command.count("--tree") == 0 && command.count("--tree-max-nodes") == 0,
                   "--tree/--tree-max-nodes need self-speculative decoding (--spec)");
    SELFSPEC_CHECK(command.count("--draft-weights") == 0 || draft_weights == "none",
                   "--draft-weights needs self-speculative decoding (--spec)");
    SELFSPEC_CHECK(command.count("--lookup") == 0 && command.count("--lookup-min-ngram") == 0 &&
                       command.count("--lookup-max-draft") == 0,
                   "--lookup/--lookup-min-ngram/--lookup-max-draft need self-speculative decoding "
                   "(--spec: its drafter drafts the rounds without a match)");
    return;
  }
  kind->validate(command);
  SELFSPEC_CHECK(lookup == 0 || lookup >= lookup_min_ngram,
                 "--lookup {} is shorter than --lookup-min-ngram {}", lookup, lookup_min_ngram);
  TreeWidths::parse(tree, "--tree");
  if (command.count("--draft-vocab-size") > 0) parse_draft_vocab_sizes(draft_vocab_size);
  const std::vector<std::string> kinds_asked = controller_kinds();
  const bool cali =
      std::find(kinds_asked.begin(), kinds_asked.end(), "cali-ts") != kinds_asked.end();
  SELFSPEC_CHECK(cali == (command.count("--cali-predictor") > 0),
                 "--controller cali-ts and --cali-predictor FILE go together");
  for (const char* name : {"--cali-sigma-m", "--cali-sigma-s", "--cali-theta0"}) {
    SELFSPEC_CHECK(cali || command.count(name) == 0, "{} needs --controller cali-ts", name);
  }
  for (const std::string& kind_name : kinds_asked) {
    ControllerOptions checked = controller;
    checked.kind = kind_name;
    checked.validate();
  }
}

nlohmann::json SpeculativeOptions::describe(int num_layers) const {
  nlohmann::json out = {{"drafter", spec},
                        {"controller", controller.kind},
                        {"max_draft", controller.max_draft},
                        {"logits", logits},
                        {"tree", TreeWidths::parse(tree, "--tree").describe()}};
  if (tree != "none") out["tree_max_nodes"] = tree_max_nodes;
  if (draft_weights != "none") out["draft_weights"] = draft_weights;
  if (lookup > 0) {
    out["lookup"] = {
        {"max_ngram", lookup}, {"min_ngram", lookup_min_ngram}, {"max_draft", lookup_max_draft}};
  }
  if (const DrafterKind* kind = chosen()) kind->describe(out, num_layers);
  return out;
}

}  // namespace selfspec
