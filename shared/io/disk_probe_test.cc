#include "shared/io/disk_probe.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/test_util.h"

namespace flotilla::io {
namespace {

using ::testing::HasSubstr;

TEST(DiskProbeTest, SmallProbeStopsAtByteCap) {
  testing::ScratchDir dir;
  const std::string path = dir.File("probe.bin");
  ASSERT_TRUE(testing::WritePatternFile(path, 16ull << 20).ok());
  for (ReaderKind kind : {ReaderKind::kAuto, ReaderKind::kPread}) {
    auto r = ProbeRandomReads(path, 1250000, 4, /*seconds=*/5,
                              /*max_bytes=*/8ull << 20, kind);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->read_size, AlignUp(1250000));
    EXPECT_EQ(r->queue_depth, 4);
    EXPECT_GT(r->reads, 0u);
    EXPECT_LE(r->bytes, 8ull << 20);
    EXPECT_EQ(r->bytes, r->reads * r->read_size);
    EXPECT_GT(r->gb_per_s, 0);
    EXPECT_GT(r->p99_ms, 0);
    EXPECT_LE(r->p50_ms, r->p99_ms);
    EXPECT_TRUE(r->direct);
    EXPECT_THAT(FormatProbeResult(*r), HasSubstr("QD4"));
  }
}

TEST(DiskProbeTest, StopsOnTime) {
  testing::ScratchDir dir;
  const std::string path = dir.File("probe.bin");
  ASSERT_TRUE(testing::WritePatternFile(path, 4ull << 20).ok());
  auto r = ProbeRandomReads(path, 4096, 2, /*seconds=*/0.1, /*max_bytes=*/0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->seconds, 2.0);
}

TEST(DiskProbeTest, Errors) {
  testing::ScratchDir dir;
  const std::string path = dir.File("tiny.bin");
  ASSERT_TRUE(testing::WritePatternFile(path, 4096).ok());
  EXPECT_EQ(ProbeRandomReads(path, 1 << 20, 1, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ProbeRandomReads(dir.File("missing"), 4096, 1, 1, 0).ok());
  EXPECT_FALSE(ProbeRandomReads(path, 4096, 0, 1, 0).ok());
}

}  // namespace
}  // namespace flotilla::io
