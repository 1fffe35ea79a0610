#include "model_io/mapped_file.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace selfspec {
namespace {

std::string errno_text(int error) {
  return std::strerror(error);
}

// Closes a file descriptor unless ownership was taken with release().
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::size_t page_size() {
  static const std::size_t kPage = [] {
    const long page = ::sysconf(_SC_PAGESIZE);
    return page > 0 ? static_cast<std::size_t>(page) : std::size_t{4096};
  }();
  return kPage;
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  int raw_fd = -1;
  do {
    raw_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (raw_fd < 0 && errno == EINTR);
  if (raw_fd < 0) {
    const int error = errno;
    if (error == ENOENT)
      fail("{}: cannot open for mapping: the file does not exist", path.string());
    fail("{}: cannot open for mapping: {}", path.string(), errno_text(error));
  }
  FdGuard fd(raw_fd);

  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    fail("{}: cannot stat the opened file: {}", path.string(), errno_text(errno));
  }
  if (S_ISDIR(info.st_mode)) fail("{}: expected a file to map, found a directory", path.string());
  if (!S_ISREG(info.st_mode)) {
    fail("{}: expected a regular file to map, found a special file (mode {:o})", path.string(),
         static_cast<unsigned>(info.st_mode & S_IFMT));
  }
  const auto size = static_cast<std::size_t>(info.st_size);
  const std::byte* data = nullptr;
  if (size > 0) {  // mmap of length 0 is invalid; an empty file maps to an empty span
    void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (mapped == MAP_FAILED) {
      fail("{}: mmap of {} bytes failed: {}", path.string(), size, errno_text(errno));
    }
    data = static_cast<const std::byte*>(mapped);
  }
  data_ = data;
  size_ = size;
  fd_ = fd.release();
}

MappedFile::~MappedFile() {
  reset();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void MappedFile::reset() noexcept {
  if (data_ != nullptr) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): munmap takes a non-const pointer.
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

void MappedFile::release(std::size_t offset, std::size_t length) const {
  SELFSPEC_CHECK(offset <= size_ && length <= size_ - offset,
                 "{}: release of bytes [{}, {}) is outside the mapped {} bytes", path_.string(),
                 offset, offset + length, size_);
  if (data_ == nullptr || length == 0) return;
  // Only whole pages inside the range are dropped, so neighbouring data stays resident.
  const std::size_t page = page_size();
  const std::size_t begin = (offset + page - 1) / page * page;
  const std::size_t end = (offset + length) / page * page;
  if (begin >= end) return;
  // Advisory only: a failure costs memory, not correctness, so it is not an error.
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): madvise takes a non-const pointer.
  ::madvise(const_cast<std::byte*>(data_ + begin), end - begin, MADV_DONTNEED);
}

}  // namespace selfspec
