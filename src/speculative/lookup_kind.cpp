// --spec lookup: lookup drafts alone (a SourcedDrafter, draft/sourced_drafter.hpp, over
// PlainStepDrafter): where the last N tokens (--lookup N) occurred before in the prompt or output,
// the tokens that followed them are the round's draft; elsewhere a round is a plain decode step,
// with no draft forward at all. For models whose self-drafts cost more than they bring
// (SmolLM2-135M: α 0.14 at c 0.12), and text that repeats (summaries, code).
#include "draft/plain_step_drafter.hpp"
#include "speculative/drafter_kind.hpp"

namespace selfspec {
namespace {

class LookupKind final : public DrafterKind {
 public:
  std::string_view name() const override { return "lookup"; }
  std::string_view help() const override {
    return "lookup drafts alone (--lookup N): copied text, plain steps elsewhere";
  }
  std::string foreign_options_message() const override { return ""; }
  bool needs_lookup() const override { return true; }  // --lookup is shared
  std::unique_ptr<Drafter> make_drafter(int num_layers, std::uint64_t /*seed*/) const override {
    return std::make_unique<PlainStepDrafter>(num_layers);
  }
  std::string label() const override { return "lookup only"; }
};

}  // namespace

std::unique_ptr<DrafterKind> make_lookup_kind() {
  return std::make_unique<LookupKind>();
}

}  // namespace selfspec
