#include "launch/job.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/process_identity.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace selfspec::launch {

Job::Job(int threads) {
  if (launched_under_mpi()) mpi_ = std::make_unique<MpiRuntime>();
  comm_ = make_world_communicator();
  const int local_ranks = process_identity().local_size;
  set_num_threads(threads > 0 ? threads : default_num_threads(local_ranks));
}

int report_error(const std::exception& error) {
  std::fflush(stdout);
  fmt::print(stderr, "error: {}\n", error.what());
  std::fflush(stderr);
  return 1;
}

int run_job(int threads, const std::function<int(Job&)>& body) {
  std::unique_ptr<Job> job;
  try {
    job = std::make_unique<Job>(threads);
    return body(*job);
  } catch (const std::exception& error) {
    std::fflush(stdout);
    const ProcessIdentity& id = process_identity();
    if (id.size > 1) {
      fmt::print(stderr, "{} error: {}\n", rank_prefix(), error.what());
    } else {
      fmt::print(stderr, "error: {}\n", error.what());
    }
    std::fflush(stderr);
    // End every rank: a peer may be waiting in a collective this rank will never join.
    if (MpiRuntime::active() && id.size > 1) MpiRuntime::abort_job(1);
    return 1;
  }
}

}  // namespace selfspec::launch
