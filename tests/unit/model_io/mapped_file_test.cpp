#include "model_io/mapped_file.hpp"

#include "core/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/model_io/raw_safetensors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>

namespace selfspec {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TempDir;

std::string text_of(const MappedFile& file) {
  return {reinterpret_cast<const char*>(file.bytes().data()), file.size()};
}

TEST(MappedFile, MapsTheWholeFile) {
  TempDir dir;
  const std::string content = "hello, mapped world";
  testing::write_file(dir / "data.bin", content);
  const MappedFile file(dir / "data.bin");
  EXPECT_EQ(file.size(), content.size());
  EXPECT_EQ(file.path(), dir / "data.bin");
  EXPECT_EQ(text_of(file), content);
}

TEST(MappedFile, EmptyFileMapsToAnEmptySpan) {
  TempDir dir;
  testing::write_file(dir / "empty.bin", "");
  const MappedFile file(dir / "empty.bin");
  EXPECT_EQ(file.size(), 0u);
  EXPECT_TRUE(file.bytes().empty());
  file.release(0, 0);
}

TEST(MappedFile, MissingFileNamesThePath) {
  TempDir dir;
  try {
    const MappedFile file(dir / "nope.bin");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("nope.bin"), HasSubstr("does not exist")));
  }
}

TEST(MappedFile, DirectoryIsRejected) {
  TempDir dir;
  std::filesystem::create_directories(dir / "sub.safetensors");
  try {
    const MappedFile file(dir / "sub.safetensors");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("sub.safetensors"), HasSubstr("directory")));
  }
}

TEST(MappedFile, MoveTransfersTheMapping) {
  TempDir dir;
  testing::write_file(dir / "a.bin", "abcdef");
  testing::write_file(dir / "b.bin", "xyz");
  MappedFile a(dir / "a.bin");
  MappedFile moved(std::move(a));
  EXPECT_EQ(text_of(moved), "abcdef");
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  MappedFile b(dir / "b.bin");
  b = std::move(moved);
  EXPECT_EQ(text_of(b), "abcdef");
  MappedFile empty;
  EXPECT_EQ(empty.size(), 0u);
}

TEST(MappedFile, ReleaseKeepsTheContentReadable) {
  TempDir dir;
  std::string content(5 * 4096 + 123, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 7 % 251);
  testing::write_file(dir / "big.bin", content);
  const MappedFile file(dir / "big.bin");
  EXPECT_EQ(text_of(file), content);
  file.release(0, file.size());
  file.release(100, 3 * 4096);
  file.release(4096, 1);
  EXPECT_EQ(text_of(file), content);  // dropped pages fault back in from the file
}

TEST(MappedFile, ReleaseOutsideTheFileIsAnError) {
  TempDir dir;
  testing::write_file(dir / "small.bin", "0123456789");
  const MappedFile file(dir / "small.bin");
  EXPECT_THROW(file.release(5, 6), Error);
  try {
    file.release(11, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("small.bin"));
  }
}

}  // namespace
}  // namespace selfspec
