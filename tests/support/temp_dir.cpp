#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <system_error>

namespace selfspec::testing {

TempDir::TempDir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() /
          fmt::format("{}-{}-{}-{:08x}", prefix, getpid(), counter++, rd());
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace selfspec::testing
