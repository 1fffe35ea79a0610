#include "launch/bench/run_lines.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace selfspec::launch {
namespace {

using std::chrono::milliseconds;

// Runs at the given times (ms from a start); returns which were shown and their notes.
std::vector<std::string> lines_of(const std::vector<int>& at_ms) {
  RunLines lines;
  const RunLines::Clock::time_point start = RunLines::Clock::now();
  std::vector<std::string> shown;
  const int runs = static_cast<int>(at_ms.size());
  for (int run = 0; run < runs; ++run) {
    lines.start_run(run, runs, start + milliseconds(at_ms[static_cast<std::size_t>(run)]));
    if (lines.shown()) shown.push_back(std::to_string(run) + lines.hidden_note());
  }
  return shown;
}

TEST(RunLines, SlowRunsAreAllShown) {
  EXPECT_EQ(lines_of({0, 1000, 2500, 4000}), (std::vector<std::string>{"0", "1", "2", "3"}));
}

TEST(RunLines, FastRunsShowAtMostOneASecondAndTheLast) {
  // Runs every 100 ms: run 0, then the first run a second after it (10), then 20, and the last.
  std::vector<int> at;
  for (int run = 0; run < 25; ++run) at.push_back(100 * run);
  EXPECT_EQ(lines_of(at), (std::vector<std::string>{"0", "10 (9 runs since the last line)",
                                                    "20 (9 runs since the last line)",
                                                    "24 (3 runs since the last line)"}));
}

TEST(RunLines, OneRunIsShown) {
  EXPECT_EQ(lines_of({0}), (std::vector<std::string>{"0"}));
}

}  // namespace
}  // namespace selfspec::launch
