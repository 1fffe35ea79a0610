#include "core/logging.hpp"

#include "core/process_identity.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace selfspec::log {
namespace {
std::atomic<Level> g_level{Level::kInfo};

bool is_root() {
  return process_identity().rank == 0;
}
}  // namespace

void set_level(Level new_level) {
  g_level = new_level;
}
Level level() {
  return g_level;
}

void write_info(std::string_view message) {
  if (!is_root()) return;
  fmt::print(stderr, "{}\n", message);
  std::fflush(stderr);
}

void write_debug(std::string_view message) {
  fmt::print(stderr, "{} {}\n", rank_prefix(), message);
  std::fflush(stderr);
}

void write_warning(std::string_view message) {
  fmt::print(stderr, "{} warning: {}\n", rank_prefix(), message);
  std::fflush(stderr);
}

Progress::Progress(std::string label, std::int64_t total)
    : label_(std::move(label)),
      total_(total),
      enabled_(is_root() && level() >= Level::kInfo),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

void Progress::update(std::int64_t done) {
  done_ = done;
  if (!enabled_ || done_ >= total_) return;
  const auto now = std::chrono::steady_clock::now();
  // Quiet for work that finishes within a second; then at most two lines a second.
  if (now - start_ < std::chrono::seconds(1) ||
      now - last_print_ < std::chrono::milliseconds(500)) {
    return;
  }
  last_print_ = now;
  printed_ = true;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  // A terminal gets one line rewritten in place; a log file gets one line per update.
  const char* end = isatty(STDERR_FILENO) ? "\r" : "\n";
  fmt::print(stderr, "{}: {}/{} ({:.1f} s){}", label_, done_, total_, seconds, end);
  std::fflush(stderr);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!printed_ && seconds < 1.0) return;
  fmt::print(stderr, "{}: {}/{} done in {:.2f} s\n", label_, total_, total_, seconds);
  std::fflush(stderr);
}

Progress::~Progress() {
  if (!finished_ && done_ >= total_) finish();
}

}  // namespace selfspec::log
