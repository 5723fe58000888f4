#include "shared/io/disk_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/io/aligned_buffer.h"
#include "shared/testing/io_test_util.h"

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
    EXPECT_LE(r->total_bytes, 8ull << 20);
    EXPECT_LE(r->bytes, r->total_bytes);
    EXPECT_EQ(r->bytes, r->reads * r->read_size);
    EXPECT_EQ(r->span_bytes, (16ull << 20) / r->read_size * r->read_size);
    EXPECT_GT(r->gb_per_s, 0);
    EXPECT_GT(r->p99_ms, 0);
    EXPECT_LE(r->p50_ms, r->p99_ms);
    EXPECT_TRUE(r->direct);
    EXPECT_THAT(FormatProbeResult(*r), HasSubstr("QD4"));
  }
}

// The window excludes start-up and drain, lasts the time asked for, and the
// queue is refilled on every completion (a probe that submits a batch and
// waits for all of it would average about half the queue depth).
TEST(DiskProbeTest, SteadyWindowKeepsQueueFull) {
  testing::ScratchDir dir;
  const std::string path = dir.File("probe.bin");
  ASSERT_TRUE(testing::WritePatternFile(path, 16ull << 20).ok());
  for (ReaderKind kind : {ReaderKind::kAuto, ReaderKind::kPread}) {
    auto r = ProbeRandomReads(path, 64 << 10, 8, /*seconds=*/0.2, 0, kind);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->steady);
    EXPECT_GE(r->seconds, 0.2);
    EXPECT_LT(r->seconds, 10.0);
    EXPECT_GE(r->reads, 16u);  // at least 2 x queue depth
    // Start-up wave and drain are read but not timed.
    EXPECT_GE(r->total_bytes, r->bytes + 8 * r->read_size + 7 * r->read_size);
    EXPECT_GT(r->mean_queue_depth, 7.0) << FormatProbeResult(*r);
    EXPECT_LE(r->mean_queue_depth, 8.0 + 1e-9);
  }
}

// 2 MiB pages are best effort (THP may be off or memory fragmented); the
// probe must work either way and say which it got.
TEST(DiskProbeTest, HugePageBuffers) {
  testing::ScratchDir dir;
  const std::string path = dir.File("probe.bin");
  ASSERT_TRUE(testing::WritePatternFile(path, 16ull << 20).ok());
  DiskProbeOptions o;
  o.read_size = 1253376;
  o.queue_depth = 4;
  o.seconds = 0.05;
  o.huge_pages = true;
  auto r = ProbeRandomReads({path}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->huge_page_fraction, 0.0);
  EXPECT_LE(r->huge_page_fraction, 1.0);
  EXPECT_THAT(FormatProbeResult(*r), HasSubstr(" pages"));
  std::printf("huge_pages: %s\n", FormatProbeResult(*r).c_str());
}

TEST(DiskProbeTest, SeveralFilesShareOneOffsetSpace) {
  testing::ScratchDir dir;
  ASSERT_TRUE(testing::WritePatternFile(dir.File("a"), 3ull << 20).ok());
  ASSERT_TRUE(testing::WritePatternFile(dir.File("b"), 1ull << 20).ok());
  ASSERT_TRUE(testing::WritePatternFile(dir.File("small"), 4096).ok());
  DiskProbeOptions o;
  o.read_size = 1 << 20;
  o.queue_depth = 2;
  o.seconds = 0.05;
  auto r =
      ProbeRandomReads({dir.File("a"), dir.File("b"), dir.File("small")}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->span_bytes, 4ull << 20);  // "small" holds no whole read
}

TEST(DiskProbeTest, PermutationVisitsEverySlotOnce) {
  for (uint64_t n : {1ull, 2ull, 3ull, 7ull, 64ull, 1000ull, 6553ull}) {
    internal::RandomPermutation p(n, n * 31);
    std::vector<bool> seen(n, false);
    uint64_t in_place = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t x = p(i);
      ASSERT_LT(x, n);
      EXPECT_FALSE(seen[x]) << "n=" << n << " i=" << i;
      seen[x] = true;
      in_place += x == i;
    }
    if (n >= 64) {
      EXPECT_LT(in_place, n / 8) << "not shuffled, n=" << n;
    }
  }
}

TEST(DiskProbeTest, RefusesSparseAndUnwrittenFiles) {
  testing::ScratchDir dir;
  const std::string hole = dir.File("hole.bin");
  {
    const int fd = ::open(hole.c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 64 << 20), 0);
    ::close(fd);
  }
  auto r = ProbeRandomReads(hole, 1 << 20, 1, 0.05, 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("sparse"));

  const std::string half = dir.File("half.bin");
  ASSERT_TRUE(testing::WritePatternFile(half, 8 << 20).ok());
  ASSERT_EQ(::truncate(half.c_str(), 16 << 20), 0);  // 8 MiB hole at the end
  auto f = File::Open(half, true);
  ASSERT_TRUE(f.ok());
  auto written = WrittenBytes(*f);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, 8u << 20);
  EXPECT_FALSE(CheckWritten(*f).ok());

  const std::string pre = dir.File("prealloc.bin");
  const int fd = ::open(pre.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  const int rc = ::fallocate(fd, 0, 0, 16 << 20);
  ::close(fd);
  if (rc != 0) GTEST_SKIP() << "fallocate unsupported here";
  r = ProbeRandomReads(pre, 1 << 20, 1, 0.05, 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition)
      << r.status();

  const std::string full = dir.File("full.bin");
  ASSERT_TRUE(testing::WritePatternFile(full, 5 << 20).ok());
  f = File::Open(full, true);
  ASSERT_TRUE(f.ok());
  written = WrittenBytes(*f);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, 5u << 20);
  EXPECT_TRUE(CheckWritten(*f).ok());
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
  EXPECT_FALSE(ProbeRandomReads(std::vector<std::string>{}, {}).ok());
}

}  // namespace
}  // namespace flotilla::io

namespace flotilla::io {
namespace {

// Manual measurement, skipped unless FLOTILLA_PROBE_PATH names a large file
// on the disk to measure. Optional: FLOTILLA_PROBE_READ_SIZE (bytes,
// default 1250000 = one k3-bench expert), FLOTILLA_PROBE_QDS (default
// "1,32"), FLOTILLA_PROBE_SECONDS (default 3), FLOTILLA_PROBE_READER
// (auto|io_uring|pread). Several files: separate them with commas. Drop the
// page cache first for cold numbers; with O_DIRECT it matters only if the
// filesystem refused O_DIRECT.
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
    DiskProbeOptions o;
    o.read_size = read_size;
    o.queue_depth = qd;
    o.seconds = seconds;
    o.kind = *kind;
    auto r = ProbeRandomReads(
        std::vector<std::string>(absl::StrSplit(path, ',')), o);
    ASSERT_TRUE(r.ok()) << r.status();
    std::printf("probe %s\n", FormatProbeResult(*r).c_str());
  }
}

}  // namespace
}  // namespace flotilla::io
