#include "core/parallel.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace selfspec {
namespace {
std::atomic<int> g_threads{0};

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}
}  // namespace

void set_num_threads(int threads) {
  g_threads = std::max(1, threads);
}

int num_threads() {
  int threads = g_threads.load();
  if (threads == 0) {
    threads = default_num_threads(1);
    g_threads = threads;
  }
  return threads;
}

int default_num_threads(int local_ranks) {
  const int cores = available_cores();
  const int online = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // A launcher that bound this rank to a core set (mpirun --bind-to, srun --cpu-bind) already
  // divided the node: use the whole set. Otherwise share the node between the local ranks.
  if (cores < online) return cores;
  return std::max(1, cores / std::max(1, local_ranks));
}

}  // namespace selfspec
