// Logging to stderr. Informational messages and progress come from rank 0 only; warnings and
// errors from any rank carry the "[rank r/n host]" prefix. stdout is reserved for results.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace selfspec::log {

enum class Level { kQuiet = 0, kInfo = 1, kDebug = 2 };
void set_level(Level level);
Level level();

void write_info(std::string_view message);
void write_debug(std::string_view message);
void write_warning(std::string_view message);

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  if (level() >= Level::kInfo) write_info(fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  if (level() >= Level::kDebug) write_debug(fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  write_warning(fmt::format(format, std::forward<Args>(args)...));
}

// Progress of long work on rank 0 ("loading weights 37/80 layers") on stderr, with the time left at
// the rate so far: silent for work that ends within a second, then rate-limited.
class Progress {
 public:
  Progress(std::string label, std::int64_t total);
  void update(std::int64_t done);
  void finish();
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  std::string label_;
  std::int64_t total_;
  std::int64_t done_ = 0;
  bool finished_ = false;
  bool printed_ = false;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
};

}  // namespace selfspec::log
