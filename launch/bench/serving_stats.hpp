// The latency statistics of `selfspec bench-serving`: what rank 0 recorded of one request in a
// run of the batched speculative loop (its arrival, the time of each of its tokens, its end and
// its result), the figures derived from that record (time to first token, inter-token gaps,
// end-to-end latency, tokens/s), and the figures of a run or of several runs together (aggregate
// tokens/s, percentiles of the latencies, mean α and M). Plain arithmetic: serving_report.hpp
// turns them into JSON and tables.
//
// Times are seconds from the start of the run. A speculative round emits several tokens at once,
// so many inter-token gaps are ~0: they are reported as they are.
#pragma once

#include "decode/generation_result.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace selfspec::launch {

// One request of one run, as rank 0 saw it.
struct RequestRecord {
  std::int64_t request = 0;        // its index in the run
  std::int64_t prompt = 0;         // the index of its prompt (prompts are cycled)
  std::int64_t prompt_tokens = 0;  // the prompt's length
  double arrival_s = 0.0;          // when it arrived
  std::vector<double> token_s;     // when each of its tokens was chosen
  double end_s = 0.0;              // when its result was handed over
  std::vector<std::int32_t> tokens;
  DecodingStats stats;
  bool stopped_on_eos = false;
};

// What a record says about its request.
struct RequestFigures {
  double ttft_s = 0.0;        // first token − arrival (queueing included)
  double e2e_s = 0.0;         // end − arrival
  double tokens_per_s = 0.0;  // (tokens − 1) ÷ (end − first token); 0 when that is not positive
  std::vector<double> itl_s;  // gaps between consecutive tokens
};
RequestFigures request_figures(const RequestRecord& record);

// The p-th percentile (p in [0, 100]) by linear interpolation between the closest ranks, as
// numpy.percentile does; 0 for no values.
double percentile(std::vector<double> values, double p);

// A latency's distribution over requests (or gaps).
struct Distribution {
  double p50 = 0.0;
  double p99 = 0.0;
  double mean = 0.0;
  std::int64_t count = 0;
};
Distribution distribution(const std::vector<double>& values);

// The figures of one run, or of several runs of one configuration together (their requests and
// their summed wall time).
struct ServingFigures {
  std::int64_t requests = 0;
  std::int64_t generated_tokens = 0;
  double wall_s = 0.0;
  double tokens_per_s = 0.0;               // aggregate: generated ÷ wall
  double mean_request_tokens_per_s = 0.0;  // mean of the requests' own tokens/s
  Distribution ttft_s;
  Distribution itl_s;
  Distribution e2e_s;
  double mean_acceptance_rate = 0.0;  // mean α over requests (0 for plain decoding)
  double mean_accepted_length = 0.0;  // mean M over requests (1 for plain decoding)
};
ServingFigures serving_figures(std::span<const RequestRecord> requests, double wall_s);

}  // namespace selfspec::launch
