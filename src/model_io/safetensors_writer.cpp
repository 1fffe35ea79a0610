#include "model_io/safetensors_writer.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

namespace selfspec {
namespace {

constexpr std::string_view kIndexFileName = "model.safetensors.index.json";
constexpr std::string_view kSingleFileName = "model.safetensors";

// An open FILE* closed on destruction; close() reports errors.
class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "wb");
    if (file_ == nullptr) {
      fail("{}: cannot create the file for writing: {}", path_.string(), std::strerror(errno));
    }
  }
  ~OutputFile() {
    if (file_ != nullptr) std::fclose(file_);
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, std::size_t size) {
    if (size == 0) return;
    if (std::fwrite(data, 1, size, file_) != size) {
      fail("{}: write of {} bytes failed: {}", path_.string(), size, std::strerror(errno));
    }
  }
  void close() {
    std::FILE* file = std::exchange(file_, nullptr);
    const bool flushed = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
    const int error = errno;
    if (std::fclose(file) != 0 || !flushed) {
      fail("{}: flushing the file to disk failed: {}", path_.string(),
           std::strerror(flushed ? errno : error));
    }
  }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// Temporary files removed on destruction unless commit() renamed them to their final names.
class PendingFiles {
 public:
  PendingFiles() = default;
  ~PendingFiles() {
    for (const auto& [temporary, final_path] : files_) {
      std::error_code ec;
      std::filesystem::remove(temporary, ec);
    }
  }
  PendingFiles(const PendingFiles&) = delete;
  PendingFiles& operator=(const PendingFiles&) = delete;

  std::filesystem::path add(const std::filesystem::path& final_path) {
    std::filesystem::path temporary =
        final_path.parent_path() /
        fmt::format(".{}.tmp-{}", final_path.filename().string(), ::getpid());
    files_.emplace_back(temporary, final_path);
    return temporary;
  }
  // Renames in order (the index last, so a reader never sees it before its shards).
  std::vector<std::filesystem::path> commit() {
    std::vector<std::filesystem::path> written;
    while (!files_.empty()) {
      const auto [temporary, final_path] = files_.front();
      std::error_code ec;
      std::filesystem::rename(temporary, final_path, ec);
      if (ec) {
        fail("{}: cannot rename the temporary file {} into place: {}", final_path.string(),
             temporary.string(), ec.message());
      }
      files_.erase(files_.begin());
      written.push_back(final_path);
    }
    return written;
  }

 private:
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> files_;
};

std::string shard_file_name(std::size_t index, std::size_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

}  // namespace

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<std::int64_t> shape,
                            FillFn fill) {
  SELFSPEC_CHECK(!name.empty(), "SafetensorsWriter: a tensor name must not be empty");
  SELFSPEC_CHECK(name != "__metadata__",
                 "SafetensorsWriter: '__metadata__' is reserved and cannot name a tensor");
  for (const Entry& entry : entries_) {
    SELFSPEC_CHECK(entry.name != name, "SafetensorsWriter: tensor '{}' is added twice", name);
  }
  SELFSPEC_CHECK(static_cast<bool>(fill), "SafetensorsWriter: tensor '{}' has no fill function",
                 name);
  std::uint64_t nbytes = dtype_size(dtype);
  bool overflow = false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    SELFSPEC_CHECK(shape[i] >= 0, "SafetensorsWriter: tensor '{}': shape[{}] is {} (expected >= 0)",
                   name, i, shape[i]);
    if (__builtin_mul_overflow(nbytes, static_cast<std::uint64_t>(shape[i]), &nbytes)) {
      overflow = true;
    }
  }
  // A zero dimension makes the tensor empty however large the other dimensions are.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    nbytes = 0;
    overflow = false;
  }
  SELFSPEC_CHECK(!overflow, "SafetensorsWriter: tensor '{}': shape [{}] is too large", name,
                 fmt::join(shape, ", "));
  SELFSPEC_CHECK(nbytes <= static_cast<std::uint64_t>(std::numeric_limits<std::size_t>::max()),
                 "SafetensorsWriter: tensor '{}' of {} bytes does not fit in memory", name, nbytes);
  entries_.push_back(Entry{std::move(name), dtype, std::move(shape), std::move(fill), nbytes});
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

std::vector<std::filesystem::path> SafetensorsWriter::write(const std::filesystem::path& dir,
                                                            std::uint64_t max_shard_bytes) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the checkpoint directory: {}", dir.string(), ec.message());

  // Greedy packing in insertion order; a tensor larger than the limit gets a shard of its own.
  std::vector<std::vector<const Entry*>> shards(1);
  std::uint64_t total_bytes = 0;
  std::uint64_t shard_bytes = 0;
  for (const Entry& entry : entries_) {
    total_bytes += entry.nbytes;
    if (max_shard_bytes > 0 && !shards.back().empty() &&
        shard_bytes + entry.nbytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&entry);
    shard_bytes += entry.nbytes;
  }
  const bool sharded = shards.size() > 1;

  PendingFiles pending;
  std::vector<std::byte> buffer;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::string file_name =
        sharded ? shard_file_name(s, shards.size()) : std::string(kSingleFileName);
    const std::filesystem::path final_path = dir / file_name;

    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata_.empty()) header["__metadata__"] = metadata_;
    std::uint64_t offset = 0;
    for (const Entry* entry : shards[s]) {
      header[entry->name] = {{"dtype", dtype_safetensors_name(entry->dtype)},
                             {"shape", entry->shape},
                             {"data_offsets", {offset, offset + entry->nbytes}}};
      offset += entry->nbytes;
      if (sharded) weight_map[entry->name] = file_name;
    }
    std::string header_text = header.dump();
    header_text.append((8 - header_text.size() % 8) % 8, ' ');
    std::array<unsigned char, 8> length_bytes{};
    for (std::size_t i = 0; i < length_bytes.size(); ++i) {
      length_bytes[i] = static_cast<unsigned char>(header_text.size() >> (8 * i));
    }

    OutputFile out(pending.add(final_path));
    out.write(length_bytes.data(), length_bytes.size());
    out.write(header_text.data(), header_text.size());
    for (const Entry* entry : shards[s]) {
      buffer.assign(static_cast<std::size_t>(entry->nbytes), std::byte{0});
      entry->fill(std::span<std::byte>(buffer));
      out.write(buffer.data(), buffer.size());
    }
    out.close();
  }

  if (sharded) {
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", total_bytes}}},
                                          {"weight_map", weight_map}};
    const std::filesystem::path index_path = dir / kIndexFileName;
    OutputFile out(pending.add(index_path));
    const std::string text = index.dump(2) + "\n";
    out.write(text.data(), text.size());
    out.close();
  }
  std::vector<std::filesystem::path> written = pending.commit();
  if (!sharded) {
    // A stale index would shadow the new model.safetensors when the directory is opened.
    std::filesystem::remove(dir / kIndexFileName, ec);
  }
  return written;
}

}  // namespace selfspec
