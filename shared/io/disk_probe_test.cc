#include "shared/io/disk_probe.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
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

namespace flotilla::io {
namespace {

// Manual measurement, skipped unless FLOTILLA_PROBE_PATH names a large file
// on the disk to measure. Optional: FLOTILLA_PROBE_READ_SIZE (bytes,
// default 1250000 = one k3-bench expert), FLOTILLA_PROBE_QDS (default
// "1,32"), FLOTILLA_PROBE_SECONDS (default 3), FLOTILLA_PROBE_READER
// (auto|io_uring|pread). Drop the page cache first for cold numbers; with
// O_DIRECT it matters only if the filesystem refused O_DIRECT.
TEST(DiskProbeManualTest, Measure) {
  const char* path = std::getenv("FLOTILLA_PROBE_PATH");
  if (path == nullptr) GTEST_SKIP() << "set FLOTILLA_PROBE_PATH to measure";
  auto env = [](const char* name, const char* dflt) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : dflt);
  };
  uint64_t read_size = 0;
  double seconds = 0;
  ASSERT_TRUE(
      absl::SimpleAtoi(env("FLOTILLA_PROBE_READ_SIZE", "1250000"), &read_size));
  ASSERT_TRUE(absl::SimpleAtod(env("FLOTILLA_PROBE_SECONDS", "3"), &seconds));
  auto kind = ParseReaderKind(env("FLOTILLA_PROBE_READER", "auto"));
  ASSERT_TRUE(kind.ok()) << kind.status();
  for (absl::string_view qd_text :
       absl::StrSplit(env("FLOTILLA_PROBE_QDS", "1,32"), ',')) {
    int qd = 0;
    ASSERT_TRUE(absl::SimpleAtoi(qd_text, &qd)) << qd_text;
    auto r = ProbeRandomReads(path, read_size, qd, seconds, 0, *kind);
    ASSERT_TRUE(r.ok()) << r.status();
    std::printf("probe %s\n", FormatProbeResult(*r).c_str());
  }
}

}  // namespace
}  // namespace flotilla::io
