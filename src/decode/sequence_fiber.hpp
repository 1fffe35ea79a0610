// A sequence's decoding run as a fiber (a stackful coroutine on the calling thread), so that the
// batched speculative loop (decode/speculative_batch.hpp) can run many sequences' unchanged
// decoding runs at once: a run's forward suspends its fiber, the loop runs the forwards of every
// suspended fiber as one pass, then resumes them in order. Everything stays on one thread, so the
// runs' collectives need no more than MPI_THREAD_FUNNELED and happen in the same order on every
// rank (the loop resumes fibers in slot order everywhere).
//
// Boost.Context's fiber (libboost-context-dev) switches stacks; writing that by hand means
// assembly per ABI, which the library already does well. An exception thrown by the body is
// carried out of resume(); destroying a suspended fiber unwinds its stack (its objects' destructors
// run).
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>

namespace selfspec {

class SequenceFiber {
 public:
  using Body = std::function<void(SequenceFiber&)>;
  // The body does not start until the first resume().
  SequenceFiber(Body body, std::size_t stack_bytes = kDefaultStackBytes);
  ~SequenceFiber();
  SequenceFiber(const SequenceFiber&) = delete;
  SequenceFiber& operator=(const SequenceFiber&) = delete;

  // The caller's side: runs the body until it suspends or ends; rethrows what the body threw.
  void resume();
  // The body's side: back to resume()'s caller, until the next resume().
  void suspend();
  bool done() const { return done_; }

  // Forwards, the kernels' scratch and the drafters' own state run on this stack; it is
  // reserved, not touched, so most of it never takes memory. A guard page below it turns an
  // overflow into a fault instead of corruption.
  static constexpr std::size_t kDefaultStackBytes = std::size_t{8} << 20;

 private:
  struct State;
  std::unique_ptr<State> state_;
  bool done_ = false;
};

}  // namespace selfspec
