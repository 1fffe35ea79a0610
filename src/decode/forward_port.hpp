// Where a decoding run's forwards go (decode/decoding_run.hpp). Without a port a run calls
// LlamaModel::forward on its own KV cache at once. The batched speculative loop
// (decode/speculative_batch.hpp) gives each sequence's run a port whose forward() waits for the
// batch's next pass: the forwards of every sequence that is ready run there together, and each run
// gets back exactly the logits a forward of its own would have given (the kernels' token-count
// invariance, model/sequence_batch.hpp).
#pragma once

#include "backend/logit_rows.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"

#include <vector>

namespace selfspec {

class ForwardPort {
 public:
  virtual ~ForwardPort() = default;
  // Runs args over `kv` (extending it as LlamaModel::forward does) and returns the view of the
  // requested rows' logits, valid until the run's next forward. `host_logits` is the run's own
  // buffer, which a port may use or leave alone.
  virtual LogitRows forward(const ForwardArgs& args, KvCache& kv,
                            std::vector<float>& host_logits) = 0;
};

}  // namespace selfspec
