#include "draft/drafter.hpp"

namespace selfspec {

void Drafter::propose(DraftContext& context, Draft& draft) {
  for (bool more = true; more;) {
    const int parent = draft.last();
    const DraftStep step = context.step(draft, parent);
    draft.add(step.token, parent, step.confidence);
    more = step.more;
  }
}

}  // namespace selfspec
