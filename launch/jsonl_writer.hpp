// Results as JSON Lines, written as they are produced: each record is one line, appended and
// flushed to the file (and fsync'ed) before the run goes on, so a job that is preempted or killed
// keeps every result it finished. Used on rank 0 by `generate --out-jsonl` and
// `bench --out-jsonl`.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>

namespace selfspec::launch {

class JsonlWriter {
 public:
  // Opens `path` for appending (created if needed; parent directories too). Throws naming it.
  explicit JsonlWriter(const std::filesystem::path& path);
  void write(const nlohmann::json& record);
  const std::filesystem::path& path() const { return path_; }

 private:
  struct Close {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  std::filesystem::path path_;
  std::unique_ptr<std::FILE, Close> file_;
};

}  // namespace selfspec::launch
