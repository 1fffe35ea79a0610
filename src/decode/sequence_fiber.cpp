#include "decode/sequence_fiber.hpp"

#include "core/error.hpp"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <utility>

namespace selfspec {

namespace ctx = boost::context;

struct SequenceFiber::State {
  Body body;
  ctx::fiber fiber;   // the body, while the caller runs
  ctx::fiber caller;  // resume()'s caller, while the body runs
  std::exception_ptr error;
};

SequenceFiber::SequenceFiber(Body body, std::size_t stack_bytes)
    : state_(std::make_unique<State>()) {
  state_->body = std::move(body);
  state_->fiber = ctx::fiber(std::allocator_arg, ctx::protected_fixedsize_stack(stack_bytes),
                             [this](ctx::fiber&& caller) {
                               state_->caller = std::move(caller);
                               try {
                                 state_->body(*this);
                               } catch (const ctx::detail::forced_unwind&) {
                                 throw;  // a suspended fiber being destroyed: let it unwind
                               } catch (...) {
                                 state_->error = std::current_exception();
                               }
                               done_ = true;
                               return std::move(state_->caller);
                             });
}

SequenceFiber::~SequenceFiber() = default;

void SequenceFiber::resume() {
  SELFSPEC_CHECK(!done_, "resuming a sequence fiber that has ended");
  state_->fiber = std::move(state_->fiber).resume();
  if (state_->error) std::rethrow_exception(std::exchange(state_->error, nullptr));
}

void SequenceFiber::suspend() {
  state_->caller = std::move(state_->caller).resume();
}

}  // namespace selfspec
