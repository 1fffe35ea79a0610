// Whether weight memory landed on transparent huge pages (the CPU backend advises its weights
// onto them, cpu_backend.cpp): the kernel's THP mode and how much of this process's anonymous
// memory huge pages back (/proc/self/smaps_rollup AnonHugePages), for start-up notes and reports.
#pragma once

#include <cstdint>
#include <string>

namespace selfspec {

struct HugePageStatus {
  bool known = false;  // false off Linux or when /proc and /sys do not say
  std::string mode;    // "always", "madvise" or "never" (the bracketed choice)
  std::uint64_t anon_huge_bytes = 0;
};

HugePageStatus huge_page_status();

}  // namespace selfspec
