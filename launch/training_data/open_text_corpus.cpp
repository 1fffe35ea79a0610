#include "launch/training_data/open_text_corpus.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/sha256_digest.hpp"

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace selfspec::launch {
namespace {

namespace fs = std::filesystem;

// What a directory walk leaves out: hidden files and directories (a download's stamp, a VCS
// directory) and scripts/get-open-text.sh's SOURCES.json, which records where the text came from
// and is not text itself. A path named directly is always read.
bool skipped_in_walk(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.starts_with('.') || name == "SOURCES.json";
}

// Root: the regular files under the paths, sorted, each path's own files together.
std::vector<std::string> list_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    SELFSPEC_CHECK(fs::exists(path), "--open-text-files: {} does not exist", path);
    if (fs::is_regular_file(path)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::string> found;
    for (auto it = fs::recursive_directory_iterator(path); it != fs::recursive_directory_iterator();
         ++it) {
      if (skipped_in_walk(it->path())) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) found.push_back(it->path().string());
    }
    std::sort(found.begin(), found.end());
    SELFSPEC_CHECK(!found.empty(), "--open-text-files: {} holds no files", path);
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SELFSPEC_CHECK(in.good(), "--open-text-files: cannot read {}", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](unsigned char c) { return std::isspace(c) != 0; });
}

// A window of ids with the file it came from.
struct Window {
  std::size_t source = 0;
  std::vector<std::int32_t> ids;
};

void cut_windows(std::vector<std::int32_t> ids, std::size_t source, std::int64_t window,
                 std::vector<Window>& out) {
  const auto n = static_cast<std::int64_t>(ids.size());
  for (std::int64_t begin = 0; begin < n; begin += window) {
    const std::int64_t end = std::min(n, begin + window);
    if (begin > 0 && end - begin < std::max<std::int64_t>(window / 4, 1)) break;
    out.push_back({source, {ids.begin() + begin, ids.begin() + end}});
  }
}

}  // namespace

OpenTextCorpus read_open_text(Engine& engine, const OpenTextOptions& options) {
  OpenTextCorpus corpus;
  if (options.paths.empty()) return corpus;
  SELFSPEC_CHECK(options.window >= 4, "--open-text-window {}: at least 4 tokens", options.window);
  engine.check_context(options.window, 0);
  Communicator& comm = engine.comm();
  std::vector<std::string> files;
  if (comm.is_root()) files = list_files(options.paths);
  std::uint64_t count = files.size();
  comm.broadcast_object(count, 0);
  std::vector<Window> windows;
  log::Progress progress("tokenizing open text (files)", static_cast<std::int64_t>(count));
  for (std::uint64_t f = 0; f < count; ++f) {
    std::string text;
    std::uint8_t usable = 1;
    if (comm.is_root()) {
      text = read_text(files[f]);
      usable = blank(text) ? 0 : 1;
      corpus.sources.push_back({files[f], text.size(), sha256_of_bytes(text), 0, 0});
    }
    comm.broadcast_object(usable, 0);
    if (usable != 0) {
      std::vector<std::int32_t> ids = engine.prepare_prompt(text, {}, true);
      if (comm.is_root()) corpus.sources.back().tokens = static_cast<std::int64_t>(ids.size());
      cut_windows(std::move(ids), f, options.window, windows);
    }
    progress.update(static_cast<std::int64_t>(f + 1));
  }
  progress.finish();
  // The same shuffle on every rank (the windows are the same everywhere).
  boost::random::mt19937_64 rng(options.seed);
  for (std::size_t i = windows.size(); i > 1; --i) {
    boost::random::uniform_int_distribution<std::size_t> pick(0, i - 1);
    std::swap(windows[i - 1], windows[pick(rng)]);
  }
  for (Window& w : windows) {
    const auto n = static_cast<std::int64_t>(w.ids.size());
    if (options.max_tokens > 0 && corpus.tokens_kept + n > options.max_tokens) continue;
    corpus.tokens_kept += n;
    if (comm.is_root()) ++corpus.sources[w.source].windows_kept;
    corpus.windows.push_back(std::move(w.ids));
  }
  return corpus;
}

nlohmann::ordered_json open_text_json(const OpenTextOptions& options,
                                      const OpenTextCorpus& corpus) {
  nlohmann::ordered_json sources = nlohmann::ordered_json::array();
  std::uint64_t bytes = 0;
  for (const OpenTextSource& s : corpus.sources) {
    bytes += s.bytes;
    sources.push_back({{"path", s.path},
                       {"bytes", s.bytes},
                       {"sha256", s.sha256},
                       {"tokens", s.tokens},
                       {"windows_kept", s.windows_kept}});
  }
  return {{"paths", options.paths},
          {"window", options.window},
          {"max_tokens", options.max_tokens},
          {"seed", options.seed},
          {"files", corpus.sources.size()},
          {"bytes", bytes},
          {"windows", corpus.windows.size()},
          {"tokens", corpus.tokens_kept},
          {"sources", sources}};
}

}  // namespace selfspec::launch
