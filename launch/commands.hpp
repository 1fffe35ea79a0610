// The `selfspec` subcommands. Each adds its options to CLI11 and sets `run` to its body.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace selfspec::launch {

using CommandBody = std::function<int()>;

void add_generate_command(CLI::App& app, CommandBody& run);
void add_info_command(CLI::App& app, CommandBody& run);
void add_tokenize_command(CLI::App& app, CommandBody& run);
void add_make_model_command(CLI::App& app, CommandBody& run);
void add_bench_command(CLI::App& app, CommandBody& run);
void add_bench_serving_command(CLI::App& app, CommandBody& run);
void add_serve_command(CLI::App& app, CommandBody& run);
void add_plan_command(CLI::App& app, CommandBody& run);
void add_search_skips_command(CLI::App& app, CommandBody& run);
void add_count_vocab_command(CLI::App& app, CommandBody& run);
void add_collect_exit_data_command(CLI::App& app, CommandBody& run);
void add_collect_cali_data_command(CLI::App& app, CommandBody& run);
void add_compare_weights_command(CLI::App& app, CommandBody& run);

}  // namespace selfspec::launch
