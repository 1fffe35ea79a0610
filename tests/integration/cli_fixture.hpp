// The harness of the tests that run the real `selfspec` binary: one command at a time (Cli::run,
// always under `timeout`, optionally under mpirun), or in the background (BackgroundCommand) for
// the tests that signal or kill a running job. Each test executable defines SELFSPEC_BINARY,
// SELFSPEC_MPIEXEC and SELFSPEC_MPIEXEC_FLAGS, and SELFSPEC_HAVE_MPI with
// SELFSPEC_NO_MPI_SKIP_REASON: in a build without MPI a test reaching a multi-rank run skips the
// rest of itself (SELFSPEC_SKIP_WITHOUT_MPI).
#pragma once

#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace selfspec::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  // The last line of stdout as JSON.
  nlohmann::json json() const {
    const auto end = out.find_last_not_of('\n');
    const auto begin = out.rfind('\n', end);
    return nlohmann::json::parse(out.substr(begin == std::string::npos ? 0 : begin + 1));
  }
};

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Open MPI refuses root without the first two; oversubscription lets 8 ranks share 2 cores, and
// yielding when idle keeps waiting ranks from starving the working ones.
inline void set_mpi_test_environment() {
  for (const char* name : {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
                           "OMPI_MCA_rmaps_base_oversubscribe", "OMPI_MCA_mpi_yield_when_idle"}) {
    setenv(name, "1", 0);
  }
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
}

// In a build without MPI, ends the current test (the TEST body itself, not a helper: GTEST_SKIP
// returns from the enclosing function) as skipped with the reason; what follows it launches
// mpirun. The checks before it have run and count: a failure there still fails the test.
#define SELFSPEC_SKIP_WITHOUT_MPI()                                      \
  do {                                                                   \
    if (!SELFSPEC_HAVE_MPI) GTEST_SKIP() << SELFSPEC_NO_MPI_SKIP_REASON; \
  } while (0)

// "mpirun -np N <flags> selfspec" or "selfspec". Without MPI there is no mpirun to launch: a test
// that asks for one has a missing SELFSPEC_SKIP_WITHOUT_MPI, and fails saying so.
inline std::string selfspec_command(int ranks) {
  if (ranks <= 0) return SELFSPEC_BINARY;
  if (!SELFSPEC_HAVE_MPI) {
    ADD_FAILURE() << "mpirun -np " << ranks
                  << " in a build without MPI: SELFSPEC_SKIP_WITHOUT_MPI() belongs before it";
  }
  return fmt::format("{} -np {} {} {}", SELFSPEC_MPIEXEC, ranks, SELFSPEC_MPIEXEC_FLAGS,
                     SELFSPEC_BINARY);
}

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { set_mpi_test_environment(); }

  CommandResult run(const std::string& args, int ranks = 0, int timeout_s = 120) {
    return run_command(fmt::format("timeout {} {} {}", timeout_s, selfspec_command(ranks), args));
  }

  // One selfspec process with extra environment variables ("NAME=value ..."), as a launcher
  // would set them.
  CommandResult run_in_environment(const std::string& variables, const std::string& args,
                                   int timeout_s = 120) {
    return run_command(
        fmt::format("timeout {} env {} {} {}", timeout_s, variables, SELFSPEC_BINARY, args));
  }

  // Runs a shell command line with stdout and stderr captured.
  CommandResult run_command(const std::string& command) {
    const auto out = dir_ / "stdout.txt";
    const auto err = dir_ / "stderr.txt";
    const int status = std::system(
        fmt::format("{} >{} 2>{} </dev/null", command, out.string(), err.string()).c_str());
    CommandResult result;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.out = read_file(out);
    result.err = read_file(err);
    EXPECT_NE(result.exit_code, 124) << "timed out: " << command << "\n" << result.err;
    return result;
  }

  // A small random model; returns its directory.
  std::filesystem::path make_model(const std::string& name, const std::string& extra = "") {
    const auto path = dir_ / name;
    const CommandResult r = run(fmt::format(
        "make-model --out {} --layers 3 --hidden 64 --heads 8 --kv-heads 2 --intermediate 100 "
        "--vocab 300 --seed 11 {}",
        path.string(), extra));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }

  void expect_error(const CommandResult& r, const std::string& message) {
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.exit_code, 124) << "hung instead of failing";
    EXPECT_THAT(r.err, ::testing::HasSubstr(message));
  }

  TempDir dir_{"selfspec-cli"};
};

// A command running in the background in its own process group (sh -c, stdout and stderr to
// files), for tests that signal or kill a job while it runs. The destructor kills whatever is
// left of the group, so a failing test never leaves ranks behind.
class BackgroundCommand {
 public:
  using Clock = std::chrono::steady_clock;

  BackgroundCommand(const std::string& command, const std::filesystem::path& dir)
      : out_(dir / "bg-stdout.txt"), err_(dir / "bg-stderr.txt") {
    const std::string shell =
        fmt::format("exec {} >{} 2>{} </dev/null", command, out_.string(), err_.string());
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
    std::vector<char*> argv = {const_cast<char*>("/bin/sh"), const_cast<char*>("-c"),
                               const_cast<char*>(shell.c_str()), nullptr};
    const int rc = posix_spawn(&pid_, "/bin/sh", nullptr, &attributes, argv.data(), environ);
    posix_spawnattr_destroy(&attributes);
    EXPECT_EQ(rc, 0) << "cannot start: " << command;
  }
  ~BackgroundCommand() {
    if (!finished_ && pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  BackgroundCommand(const BackgroundCommand&) = delete;
  BackgroundCommand& operator=(const BackgroundCommand&) = delete;

  std::string out() const { return read_file(out_); }
  std::string err() const { return read_file(err_); }
  // Sends a signal to the launched process itself (mpirun, or the single selfspec process).
  void signal(int sig) const { ::kill(pid_, sig); }

  // Polls `condition` every 50 ms until it holds (true) or `timeout_s` passes or the command ends.
  bool wait_until(const std::function<bool()>& condition, double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (Clock::now() < deadline) {
      if (condition()) return true;
      if (poll_exit()) return condition();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Waits for the command to end (at most timeout_s; then kills its group and reports 124).
  int wait_exit(double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (!poll_exit()) {
      if (Clock::now() >= deadline) {
        ::kill(-pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        finished_ = true;
        exit_code_ = 124;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return exit_code_;
  }

 private:
  bool poll_exit() {
    if (finished_) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    finished_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }

  std::filesystem::path out_;
  std::filesystem::path err_;
  pid_t pid_ = -1;
  bool finished_ = false;
  int exit_code_ = -1;
};

}  // namespace selfspec::testing
