#include "launch/spec_options.hpp"

#include "core/error.hpp"
#include "draft/cosine_skip_drafter.hpp"
#include "draft/layer_skip_drafter.hpp"
#include "launch/options.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace selfspec::launch {

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

// Accepts one of `allowed`, or (with lists) a comma-separated list of them.
CLI::Validator member_or_list(std::vector<std::string> allowed, bool lists) {
  return CLI::Validator(
      [allowed, lists](std::string& value) -> std::string {
        const std::vector<std::string> items =
            lists ? split_list(value) : std::vector<std::string>{value};
        for (const std::string& item : items) {
          if (std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
            std::string known;
            for (const auto& a : allowed) known += (known.empty() ? "" : ", ") + a;
            return "'" + item + "' is not one of: " + known;
          }
        }
        return {};
      },
      lists ? "LIST" : "VALUE");
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
                   "drafting method: none (autoregressive), layer-skip (a fixed skip set) or asd "
                   "(Draft on the Fly: a skip set per prompt from its cosine similarities)")
      ->check(CLI::IsMember({"none", "layer-skip", "asd"}))
      ->capture_default_str();
  group
      ->add_option("--skip-config", skip_config,
                   "skip set file (YAML/JSON {attention: [...], mlp: [...]}, configs/skips/)")
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
      ->check(member_or_list({"fixed", "threshold", "adaptive", "thompson"}, lists))
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
      ->add_option("--logits", logits,
                   "how rank 0 reads vocab-sharded logits: local (reductions; only scalars "
                   "cross ranks) or gather (whole rows)")
      ->check(member_or_list({"gather", "local"}, lists))
      ->capture_default_str();
  group->add_flag("--debug-sync", debug_sync,
                  "check after every control message that all ranks agree (fails loudly)");
  group->add_option("--trace", trace, "write one JSON line per speculative round to this file");
}

void SpecCliOptions::validate(const CLI::App& command) const {
  const bool file = command.count("--skip-config") > 0;
  const bool lists = command.count("--skip-attn") > 0 || command.count("--skip-mlp") > 0;
  const bool uniform = command.count("--skip-uniform") > 0;
  const bool asd_options = command.count("--asd-alpha") > 0 || command.count("--asd-m") > 0 ||
                           command.count("--asd-n") > 0;
  SELFSPEC_CHECK(spec == "asd" || !asd_options, "--asd-alpha/--asd-m/--asd-n need --spec asd");
  if (!fixed_skip_set()) {
    SELFSPEC_CHECK(!file && !lists && !uniform,
                   "--skip-config/--skip-attn/--skip-mlp/--skip-uniform need --spec layer-skip{}",
                   spec == "asd" ? " (--spec asd chooses its skip set per prompt)" : "");
  } else {
    SELFSPEC_CHECK(
        static_cast<int>(file) + static_cast<int>(lists) + static_cast<int>(uniform) == 1,
        "--spec layer-skip needs exactly one skip set: --skip-config FILE, or "
        "--skip-attn/--skip-mlp LISTS, or --skip-uniform R");
  }
  if (!enabled()) return;
  if (spec == "asd") asd.validate();
  for (const std::string& kind : controller_kinds()) {
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

std::unique_ptr<Drafter> SpecCliOptions::make_drafter(const SkipSet* skips, int num_layers) const {
  if (spec == "asd") return std::make_unique<CosineSkipDrafter>(num_layers, asd);
  SELFSPEC_CHECK(skips != nullptr, "--spec {} needs a skip set", spec);
  return std::make_unique<LayerSkipDrafter>(skips->plan(num_layers), skips->name);
}

std::string SpecCliOptions::drafter_label(const SkipSet* skips) const {
  if (skips != nullptr) return skips->name;
  return fmt::format("asd (alpha {}, m {}, n {})", asd.alpha, asd.m, asd.n);
}

ControllerOptions SpecCliOptions::controller_options(const std::string& kind,
                                                     std::uint64_t sampling_seed) const {
  ControllerOptions options = controller;
  options.kind = kind;
  options.seed = sampling_seed ^ kControllerSeedSalt;
  return options;
}

LogitsMode SpecCliOptions::logits_mode() const {
  return logits == "gather" ? LogitsMode::kGather : LogitsMode::kLocal;
}

nlohmann::json SpecCliOptions::describe(const SkipSet* skips, int num_layers) const {
  nlohmann::json out = {{"drafter", spec},
                        {"controller", controller.kind},
                        {"max_draft", controller.max_draft},
                        {"logits", logits}};
  if (skips != nullptr) {
    const LayerPlan plan = skips->plan(num_layers);
    out["skip_set"] = nlohmann::json::parse(skips->describe());
    out["skipped_sublayers"] = plan.skipped_count();
    out["skip_fraction"] = static_cast<double>(plan.skipped_count()) / (2.0 * num_layers);
  }
  if (spec == "asd") out["asd"] = {{"alpha", asd.alpha}, {"m", asd.m}, {"n", asd.n}};
  return out;
}

}  // namespace selfspec::launch
