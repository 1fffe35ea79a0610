#include "draft/drafter.hpp"

#include "core/error.hpp"

namespace selfspec {

DraftStep DraftContext::step_rows(const Draft& draft, int parent, const DraftRows& rows) {
  (void)draft;
  (void)parent;
  (void)rows;
  fail("this decoding loop runs no feature-head drafts");
}

void Drafter::propose(DraftContext& context, Draft& draft) {
  int parent = Draft::kRoot;
  for (bool more = true; more;) {
    const DraftStep step = context.step(draft, parent);
    const int drawn = draft.add(step.token, parent, step.confidence);
    for (const std::int32_t alternative : step.alternatives) {
      draft.add_alternative(alternative, parent);
    }
    parent = drawn;
    more = step.more;
  }
}

}  // namespace selfspec
