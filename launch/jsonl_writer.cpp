#include "launch/jsonl_writer.hpp"

#include "core/error.hpp"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

namespace selfspec::launch {

JsonlWriter::JsonlWriter(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  file_.reset(std::fopen(path.c_str(), "a"));
  SELFSPEC_CHECK(file_ != nullptr, "--out-jsonl {}: cannot open for appending: {}", path.string(),
                 std::strerror(errno));
}

void JsonlWriter::write(const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  const bool written = std::fwrite(line.data(), 1, line.size(), file_.get()) == line.size() &&
                       std::fflush(file_.get()) == 0;
  SELFSPEC_CHECK(written, "--out-jsonl {}: write failed: {}", path_.string(), std::strerror(errno));
  // On shared file systems a record must survive the node being taken away right after.
  ::fsync(::fileno(file_.get()));
}

}  // namespace selfspec::launch
