// Whether Intel AMX tiles (AMX-TILE with AMX-INT8, the int8 tile dot products that give the same
// exact integer block sums as vpdpbusd) can run here. cpuid listing AMX is not enough: on the
// Intel VMs this project has run on, cpuid lists AMX yet llama.cpp's AMX path dies with SIGILL at
// tilezero (the hypervisor does not enable the tile state). So the probe asks, in order:
//   1. cpuid: AMX-TILE and AMX-INT8 (leaf 7: EDX bits 24 and 25);
//   2. the OS: XCR0 enables the tile state (bits 17 and 18, read with xgetbv when OSXSAVE is set);
//   3. the kernel: permission to use XTILEDATA (arch_prctl ARCH_REQ_XCOMP_PERM, Linux >= 5.16);
//   4. the CPU: a child process configures a tile, zeroes it and releases it; a signal (SIGILL)
//      or a hang there refuses AMX without harming this process.
// Kernels may choose an AMX rung only when usable is true; otherwise `reason` says why, for the
// log line of the fallback (bench reports it as "amx").
#pragma once

#include <string>

namespace selfspec::kernels::cpu {

struct AmxProbe {
  bool usable = false;
  std::string reason;            // why not (empty when usable)
  bool listed_by_cpuid = false;  // cpuid lists AMX-TILE and AMX-INT8 (amx_probe() only)
};

// Every step above, once per process (the result is cached).
const AmxProbe& amx_probe();

// Steps 3 and 4 alone, whatever cpuid says.
AmxProbe probe_amx_tiles();

// Step 4 alone: the tile op in a child process, whatever cpuid, the OS and the kernel say. On a CPU
// without AMX it dies there with SIGILL and this process goes on (tests run it on every machine).
AmxProbe run_tile_op_in_child();

}  // namespace selfspec::kernels::cpu
