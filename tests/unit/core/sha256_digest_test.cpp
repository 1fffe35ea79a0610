// SHA-256 digests: the FIPS 180-2 test vector, and bytes in memory against the same bytes in files.
#include "core/sha256_digest.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace selfspec {
namespace {

TEST(Sha256Digest, BytesAndFilesGiveTheSameDigest) {
  EXPECT_EQ(sha256_of_bytes("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const auto dir =
      std::filesystem::temp_directory_path() / ("selfspec-sha256-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a") << "ab";
  std::ofstream(dir / "b") << "c";
  EXPECT_EQ(sha256_of_files({(dir / "a").string(), (dir / "b").string()}), sha256_of_bytes("abc"));
  EXPECT_EQ(sha256_of_bytes(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace selfspec
