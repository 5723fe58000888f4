#include "shared/io/file.h"

#include <unistd.h>

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/io/aligned_buffer.h"
#include "shared/testing/io_test_util.h"

namespace flotilla::io {
namespace {

using testing::FirstPatternMismatch;
using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::WritePatternFile;

constexpr uint64_t kSize = 1 << 20;
constexpr uint64_t kOddSize = (1 << 20) + 1000;  // Unaligned tail.

TEST(FileTest, DirectOpenAndAlignedRead) {
  ScratchDir dir;
  const std::string path = dir.File("a.bin");
  ASSERT_TRUE(WritePatternFile(path, kSize).ok());
  auto f = File::Open(path, /*direct=*/true);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->direct()) << "scratch dir should support O_DIRECT";
  EXPECT_EQ(f->size(), kSize);
  EXPECT_EQ(f->path(), path);
  EXPECT_GE(f->fd(), 0);
  auto buf = AlignedBuffer::Allocate(64 * 1024, true);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(f->ReadAt(40960, buf->size(), buf->data()).ok());
  EXPECT_EQ(FirstPatternMismatch(buf->data(), buf->size(), 40960), -1);
}

TEST(FileTest, DirectRejectsMisalignmentWithClearError) {
  ScratchDir dir;
  const std::string path = dir.File("a.bin");
  ASSERT_TRUE(WritePatternFile(path, kSize).ok());
  auto f = File::Open(path, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->direct());
  auto buf = AlignedBuffer::Allocate(16384, true);
  ASSERT_TRUE(buf.ok());
  absl::Status s = f->ReadAt(100, 4096, buf->data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("offset 100"));
  EXPECT_EQ(f->ReadAt(0, 100, buf->data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->ReadAt(0, 4096, buf->data() + 8).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FileTest, TailOfUnalignedFileIsZeroFilledAndPastEofIsError) {
  ScratchDir dir;
  const std::string path = dir.File("odd.bin");
  ASSERT_TRUE(WritePatternFile(path, kOddSize).ok());
  for (bool direct : {true, false}) {
    auto f = File::Open(path, direct);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->ReadableEnd(), AlignUp(kOddSize));
    auto buf = AlignedBuffer::Allocate(8192, true);
    ASSERT_TRUE(buf.ok());
    std::fill(buf->data(), buf->data() + 8192, 0xEE);
    const uint64_t last = AlignDown(kOddSize);
    ASSERT_TRUE(f->ReadAt(last, 4096, buf->data()).ok());
    EXPECT_EQ(FirstPatternMismatch(buf->data(), kOddSize - last, last), -1);
    for (uint64_t i = kOddSize - last; i < 4096; ++i) {
      ASSERT_EQ(buf->data()[i], 0) << i;
    }
    absl::Status s = f->ReadAt(last, 8192, buf->data());
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
    EXPECT_THAT(s.message(), HasSubstr(path));
    EXPECT_EQ(f->ReadAt(1ull << 40, 4096, buf->data()).code(),
              absl::StatusCode::kOutOfRange);
  }
}

TEST(FileTest, BufferedReadsAllowAnyAlignment) {
  ScratchDir dir;
  const std::string path = dir.File("a.bin");
  ASSERT_TRUE(WritePatternFile(path, kSize).ok());
  auto f = File::Open(path, /*direct=*/false);
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->direct());
  std::vector<uint8_t> buf(12345);
  ASSERT_TRUE(f->ReadAt(777, buf.size(), buf.data()).ok());
  EXPECT_EQ(FirstPatternMismatch(buf.data(), buf.size(), 777), -1);
}

TEST(FileTest, FallsBackToBufferedWhereODirectIsRefused) {
  // procfs has no direct-I/O support, so open(O_DIRECT) fails with EINVAL
  // on every kernel. (tmpfs would be the natural case, but it accepts
  // O_DIRECT since Linux 6.6.)
  auto f = File::Open("/proc/self/status", /*direct=*/true);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->direct());
  EXPECT_TRUE(f->is_open());
}

TEST(FileTest, TmpfsEitherFallsBackOrReadsDirect) {
  const std::string tmpfs = testing::TmpfsDir();
  if (tmpfs.empty()) GTEST_SKIP() << "no writable tmpfs at /dev/shm";
  const std::string path =
      tmpfs + "/flotilla_io_test_" + std::to_string(getpid());
  ASSERT_TRUE(WritePatternFile(path, kSize).ok());
  auto f = File::Open(path, /*direct=*/true);
  ASSERT_TRUE(f.ok()) << f.status();
  auto buf = AlignedBuffer::Allocate(8192, true);
  ASSERT_TRUE(buf.ok());
  if (f->direct()) {
    // Linux >= 6.6: tmpfs takes O_DIRECT, so alignment rules apply.
    EXPECT_EQ(f->ReadAt(3, 1000, buf->data()).code(),
              absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(f->ReadAt(4096, 8192, buf->data()).ok());
    EXPECT_EQ(FirstPatternMismatch(buf->data(), 8192, 4096), -1);
  } else {
    ASSERT_TRUE(f->ReadAt(3, 1000, buf->data()).ok());
    EXPECT_EQ(FirstPatternMismatch(buf->data(), 1000, 3), -1);
  }
  unlink(path.c_str());
}

TEST(FileTest, MissingFileNamesPath) {
  auto f = File::Open("/nonexistent/flotilla/x.bin", true);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(f.status().message(), HasSubstr("/nonexistent/flotilla/x.bin"));
}

TEST(FileTest, TruncatedWhileOpenIsDataLossNotHang) {
  ScratchDir dir;
  const std::string path = dir.File("t.bin");
  ASSERT_TRUE(WritePatternFile(path, kSize).ok());
  auto f = File::Open(path, true);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(truncate(path.c_str(), 4096), 0);
  auto buf = AlignedBuffer::Allocate(65536, true);
  ASSERT_TRUE(buf.ok());
  absl::Status s = f->ReadAt(0, 65536, buf->data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
}

TEST(FileTest, MoveKeepsDescriptor) {
  ScratchDir dir;
  const std::string path = dir.File("a.bin");
  ASSERT_TRUE(WritePatternFile(path, kSize).ok());
  auto f = File::Open(path, true);
  ASSERT_TRUE(f.ok());
  const int fd = f->fd();
  File g = std::move(*f);
  EXPECT_EQ(g.fd(), fd);
  EXPECT_FALSE(f->is_open());  // NOLINT(bugprone-use-after-move)
  File h;
  h = std::move(g);
  EXPECT_EQ(h.fd(), fd);
  EXPECT_EQ(h.size(), kSize);
}

}  // namespace
}  // namespace flotilla::io
