// A uniquely named temporary directory, removed with its contents on destruction.
#pragma once

#include <filesystem>
#include <string>

namespace selfspec::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "selfspec-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace selfspec::testing
