// Run configurations: `selfspec <command> --config FILE.yaml ...`. Every command-line option can
// come from the file — its keys are option names without the dashes (`max-new-tokens: 64`;
// underscores work too), values are scalars, lists (joined with commas) or booleans (flags);
// maps only group keys for readability (`decoding: {controller: adaptive}` sets --controller).
// An option given on the command line overrides the file (and --model overrides the file's
// architecture, --prompt its prompt-ids, any skip option its skip set, and `--spec none` drops
// the skip set: the autoregressive baseline of a speculative config). Relative paths of input
// files (model, architecture, tokenizer, skip-config) are relative to the config file. A key that
// names an option of another subcommand is ignored (one run config can serve generate, bench and
// plan); a key that names no option anywhere is an error naming the file and the key.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace selfspec::launch {

// argv with the options of the `--config` file of the subcommand (argv[1]) inserted after the
// subcommand name, except those the command line gives itself; argv unchanged without --config.
// Throws selfspec::Error (unreadable file, malformed YAML, unknown key).
std::vector<std::string> expand_run_config(const CLI::App& app, int argc, char** argv);

}  // namespace selfspec::launch
