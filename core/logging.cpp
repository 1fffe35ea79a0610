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

// "42 s", "3 min 05 s", "1 h 02 min": a time left, rounded to what a reader needs.
std::string duration_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {:02d} s", s / 60, s % 60);
  return fmt::format("{} h {:02d} min", s / 3600, (s % 3600) / 60);
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
  // The time left at the rate so far (nothing before the first unit is done).
  if (done_ > 0) {
    const double left = seconds * static_cast<double>(total_ - done_) / static_cast<double>(done_);
    fmt::print(stderr, "{}: {}/{} ({:.1f} s, about {} left){}", label_, done_, total_, seconds,
               duration_text(left), end);
  } else {
    fmt::print(stderr, "{}: {}/{} ({:.1f} s){}", label_, done_, total_, seconds, end);
  }
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
