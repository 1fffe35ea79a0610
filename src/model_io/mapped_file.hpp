// A read-only memory mapping of a whole file (RAII: munmap + close on destruction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace selfspec {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps the file read-only. Throws selfspec::Error naming the file on failure.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  // Tells the kernel the given byte range will not be read again (releases page cache pressure).
  void release(std::size_t offset, std::size_t length) const;

 private:
  void reset() noexcept;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;
};

}  // namespace selfspec
