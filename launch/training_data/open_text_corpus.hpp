// Open text for early-exit training data (issue 24): existing text fed to the full model by
// teacher forcing, beside its own generated continuations (EESD mixes both). The files come from
// --open-text-files (files, or directories read recursively; sorted by path), e.g. the Python
// standard library's sources for a code model or documentation prose (scripts/get-open-text.sh).
// Rank 0 reads and tokenizes each file (Engine::prepare_prompt broadcasts the ids), cuts it into
// windows of --open-text-window tokens (a file shorter than a window is one window; a file's
// last, shorter piece is kept when it has at least a quarter of a window), shuffles the windows with the seed and keeps them up to
// --open-text-tokens tokens. Each window is one sequence, at positions 0..window-1.
// Never the evaluation prompts: those are refused where the prompts are read.
#pragma once

#include "engine/engine.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace selfspec::launch {

struct OpenTextOptions {
  std::vector<std::string> paths;
  std::int64_t window = 512;
  std::int64_t max_tokens = 0;  // 0: every window
  std::uint64_t seed = 0;
};

// One file the windows come from: its path (as found), bytes, SHA-256, tokens, windows kept.
struct OpenTextSource {
  std::string path;
  std::uint64_t bytes = 0;
  std::string sha256;
  std::int64_t tokens = 0;
  std::int64_t windows_kept = 0;
};

struct OpenTextCorpus {
  std::vector<OpenTextSource> sources;             // rank 0 (empty elsewhere)
  std::vector<std::vector<std::int32_t>> windows;  // every rank, in the order kept
  std::int64_t tokens_kept = 0;
};

// Every rank calls it (collectives). Throws naming a path that is missing or unreadable.
OpenTextCorpus read_open_text(Engine& engine, const OpenTextOptions& options);

// The corpus for the data's manifest (rank 0): the options, the totals and every source.
nlohmann::ordered_json open_text_json(const OpenTextOptions& options, const OpenTextCorpus& corpus);

}  // namespace selfspec::launch
