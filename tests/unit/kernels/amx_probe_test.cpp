// The AMX probe (kernels/cpu/amx_probe.hpp): it never harms the process, it agrees with what the
// CPU can do, and a tile instruction the CPU cannot run is refused with the signal that killed the
// child — the failure seen on Intel VMs whose cpuid lists AMX.
#include "kernels/cpu/amx_probe.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cpuid.h>

namespace selfspec::kernels::cpu {
namespace {

bool cpuid_lists_amx_tile() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (d & (1u << 24)) != 0;
}

TEST(AmxProbe, SaysWhyNotWheneverItRefuses) {
  const AmxProbe& probe = amx_probe();
  EXPECT_EQ(probe.usable, probe.reason.empty()) << probe.reason;
  if (!cpuid_lists_amx_tile()) {
    EXPECT_FALSE(probe.usable);
    EXPECT_THAT(probe.reason, ::testing::HasSubstr("cpuid"));
  }
  EXPECT_EQ(&amx_probe(), &probe);  // once per process
}

TEST(AmxProbe, ATileOpTheCpuCannotRunDiesInTheChildOnly) {
  const AmxProbe child = run_tile_op_in_child();
  if (!cpuid_lists_amx_tile()) {
    EXPECT_FALSE(child.usable);
    EXPECT_THAT(child.reason, ::testing::HasSubstr("SIGILL"));
  } else {
    // With AMX listed the op runs, unless (as on some VMs) the tile state is not enabled.
    EXPECT_EQ(child.usable, child.reason.empty()) << child.reason;
  }
  EXPECT_EQ(child.usable, run_tile_op_in_child().usable);  // and the process is still here
}

}  // namespace
}  // namespace selfspec::kernels::cpu
