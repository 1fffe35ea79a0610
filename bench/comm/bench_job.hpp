// How the communicator benchmarks (comm_bench, nccl_bench) run as a job: MPI started when a
// launcher started the process (a build without MPI refuses a launch of several tasks), the
// measurement run, and any error printed with the rank and ending every rank (a peer may be
// waiting in a collective this rank will never join).
#pragma once

#include <functional>

namespace selfspec {

// Runs `measure` inside the job; returns its exit status, or 1 after an error ("<rank> <name>
// error: ...").
int run_bench_job(const char* name, const std::function<int()>& measure);

}  // namespace selfspec
