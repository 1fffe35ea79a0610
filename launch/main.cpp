// selfspec: one binary, subcommands. Multi-rank use is plain `mpirun -np N selfspec generate ...`.
#include "backend/backend.hpp"
#include "comm/mpi_runtime.hpp"
#include "launch/commands.hpp"
#include "launch/run_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  CLI::App app{
      "selfspec: LLaMA-family inference with tensor parallelism and lossless "
      "self-speculative decoding"};
  // The version, the build's flavour (MPI: multi-rank jobs; CUDA: the GPU backend) and the
  // instruction set the CPU kernels run with on this machine.
  std::string cpu_isa;
  try {
    cpu_isa = selfspec::cpu_kernel_isa();
  } catch (const std::exception& error) {
    cpu_isa = fmt::format("unusable: {}", error.what());
  }
  app.set_version_flag(
      "--version", fmt::format("selfspec {} (MPI {}, CUDA {}, CPU kernels {})", SELFSPEC_VERSION,
                               selfspec::mpi_built() ? "yes" : "no: single rank",
                               SELFSPEC_HAVE_CUDA ? "yes" : "no", cpu_isa));
  app.require_subcommand(1);
  selfspec::launch::CommandBody run;
  selfspec::launch::add_generate_command(app, run);
  selfspec::launch::add_info_command(app, run);
  selfspec::launch::add_tokenize_command(app, run);
  selfspec::launch::add_make_model_command(app, run);
  selfspec::launch::add_bench_command(app, run);
  selfspec::launch::add_bench_serving_command(app, run);
  selfspec::launch::add_serve_command(app, run);
  selfspec::launch::add_plan_command(app, run);
  selfspec::launch::add_search_skips_command(app, run);
  selfspec::launch::add_count_vocab_command(app, run);
  selfspec::launch::add_collect_exit_data_command(app, run);
  selfspec::launch::add_collect_cali_data_command(app, run);
  selfspec::launch::add_compare_weights_command(app, run);

  // CLI11 would only say "A subcommand is required" for a misspelt subcommand: name it.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> known;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known.push_back(sub->get_name());
    }
    if (std::find(known.begin(), known.end(), argv[1]) == known.end()) {
      fmt::print(stderr, "error: unknown subcommand '{}' (one of: {})\n", argv[1],
                 fmt::join(known, ", "));
      return 2;
    }
  }
  std::vector<std::string> args;
  try {
    args = selfspec::launch::expand_run_config(app, argc, argv);
  } catch (const std::exception& error) {
    fmt::print(stderr, "error: {}\n", error.what());
    return 2;
  }
  try {
    // CLI11 parses a reversed vector of the arguments after the program name.
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);
    app.parse(std::move(reversed));
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return run();
}
