#include "shared/base/read_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace flotilla::base {
namespace {

// A path under the test's temporary directory, unique to this process.
std::string ScratchPath(const std::string& name) {
  return ::testing::TempDir() + "/read_file_test_" + std::to_string(getpid()) +
         "_" + name;
}

TEST(ReadWholeFileTest, ReturnsEveryByte) {
  const std::string path = ScratchPath("bytes");
  // Binary content: a NUL, a CR LF pair and a last line without a newline.
  const std::string bytes("a\0b\r\nlast", 9);
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
  }
  const absl::StatusOr<std::string> read = ReadWholeFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
}

TEST(ReadWholeFileTest, EmptyFileIsEmpty) {
  const std::string path = ScratchPath("empty");
  { std::ofstream out(path, std::ios::binary); }
  const absl::StatusOr<std::string> read = ReadWholeFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "");
}

// The CLIs print this message as it stands.
TEST(ReadWholeFileTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = ScratchPath("missing");
  const absl::StatusOr<std::string> read = ReadWholeFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(read.status().message(), "cannot read " + path);
}

}  // namespace
}  // namespace flotilla::base
