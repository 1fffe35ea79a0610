#include "backend/huge_pages.hpp"

#include <fstream>
#include <sstream>

namespace selfspec {

HugePageStatus huge_page_status() {
  HugePageStatus status;
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (enabled && std::getline(enabled, line)) {
    const std::size_t open = line.find('[');
    const std::size_t close = line.find(']', open);
    if (open != std::string::npos && close != std::string::npos) {
      status.mode = line.substr(open + 1, close - open - 1);
    }
  }
  std::ifstream rollup("/proc/self/smaps_rollup");
  while (rollup && std::getline(rollup, line)) {
    std::istringstream fields(line);
    std::string key;
    std::uint64_t kib = 0;
    if (fields >> key >> kib && key == "AnonHugePages:") {
      status.anon_huge_bytes = kib * 1024;
      status.known = !status.mode.empty();
    }
  }
  return status;
}

}  // namespace selfspec
