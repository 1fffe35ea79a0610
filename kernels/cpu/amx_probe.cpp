#include "kernels/cpu/amx_probe.hpp"

#include <cpuid.h>
#include <immintrin.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

namespace selfspec::kernels::cpu {
namespace {

constexpr unsigned kArchReqXcompPerm = 0x1023;  // arch_prctl: request a dynamic xfeature
constexpr unsigned kXfeatureXtiledata = 18;
constexpr std::uint64_t kXcr0TileState = (1ull << 17) | (1ull << 18);  // XTILECFG | XTILEDATA
constexpr auto kChildTimeout = std::chrono::seconds(5);

bool cpuid_lists_amx() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  const bool tile = (d & (1u << 24)) != 0;
  const bool int8 = (d & (1u << 25)) != 0;
  return tile && int8;
}

bool os_enables_tile_state() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (1u << 27)) == 0) return false;  // OSXSAVE
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const std::uint64_t xcr0 = (static_cast<std::uint64_t>(hi) << 32) | lo;
  return (xcr0 & kXcr0TileState) == kXcr0TileState;
}

// The 64-byte tile configuration: palette 1, tile 0 of 16 rows × 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::array<std::uint8_t, 14> reserved{};
  std::array<std::uint16_t, 16> colsb{};
  std::array<std::uint8_t, 16> rows{};
};
static_assert(sizeof(TileConfig) == 64);

// In the child only: a tile configured, zeroed and released. Async-signal-safe work alone.
__attribute__((target("amx-tile"))) [[noreturn]] void run_tile_op_and_exit() {
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // a SIGILL here leaves no core file behind
  TileConfig config;
  config.colsb[0] = 64;
  config.rows[0] = 16;
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_release();
  _exit(0);
}

AmxProbe refused(std::string reason) {
  return {false, std::move(reason)};
}

// Waits for the child up to kChildTimeout; kills it after.
AmxProbe wait_for_child(pid_t child) {
  const auto deadline = std::chrono::steady_clock::now() + kChildTimeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) {
      return refused(fmt::format("waiting for the tile probe failed: {}", std::strerror(errno)));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return refused("a tile instruction did not finish within 5 s in a child process");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFSIGNALED(status)) {
    return refused(fmt::format("a tile instruction died with {} in a child process",
                               sigabbrev_np(WTERMSIG(status)) != nullptr
                                   ? fmt::format("SIG{}", sigabbrev_np(WTERMSIG(status)))
                                   : fmt::format("signal {}", WTERMSIG(status))));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return refused(fmt::format("the tile probe exited with status {}", WEXITSTATUS(status)));
  }
  return {true, ""};
}

AmxProbe probe_all() {
  if (!cpuid_lists_amx()) return refused("cpuid lists no AMX-TILE/AMX-INT8");
  AmxProbe probe = os_enables_tile_state()
                       ? probe_amx_tiles()
                       : refused("the OS does not enable the tile state (XCR0)");
  probe.listed_by_cpuid = true;
  return probe;
}

}  // namespace

AmxProbe probe_amx_tiles() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    return refused(fmt::format("the kernel refused XTILEDATA permission (arch_prctl: {})",
                               std::strerror(errno)));
  }
  return run_tile_op_in_child();
}

AmxProbe run_tile_op_in_child() {
  const pid_t child = fork();
  if (child < 0) {
    return refused(fmt::format("fork for the tile probe failed: {}", std::strerror(errno)));
  }
  if (child == 0) run_tile_op_and_exit();
  return wait_for_child(child);
}

const AmxProbe& amx_probe() {
  static const AmxProbe probe = probe_all();
  return probe;
}

}  // namespace selfspec::kernels::cpu
