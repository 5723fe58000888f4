#include "shared/io/batch_reader.h"

#include <unistd.h>

#include <chrono>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/io/aligned_buffer.h"
#include "shared/testing/io_test_util.h"

namespace flotilla::io {
namespace {

using testing::FirstPatternMismatch;
using ::testing::HasSubstr;

// 32 MiB plus an unaligned tail, shared by the suite (writing it is the
// slowest part of these tests).
constexpr uint64_t kFileSize = (32ull << 20) + 1000;

class BatchReaderTest : public ::testing::TestWithParam<ReaderKind> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScratchDir();
    path_ = dir_->File("pattern.bin");
    ASSERT_TRUE(testing::WritePatternFile(path_, kFileSize).ok());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    auto f = File::Open(path_, /*direct=*/true);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(f->direct());
    file_ = std::move(*f);
  }

  // Creates a reader of the parameter's kind; skips when io_uring is
  // refused here (then kAuto covers the pread fallback).
  std::unique_ptr<BatchReader> MakeReader(int queue_depth,
                                          uint64_t chunk_bytes) {
    BatchReaderOptions options;
    options.queue_depth = queue_depth;
    options.chunk_bytes = chunk_bytes;
    auto r = CreateBatchReader(GetParam(), options);
    if (!r.ok() && GetParam() == ReaderKind::kUring &&
        r.status().code() == absl::StatusCode::kUnavailable) {
      return nullptr;
    }
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(*r) : nullptr;
  }

  // Drains the reader, returning tag -> status.
  static std::map<uint64_t, absl::Status> Drain(BatchReader* reader) {
    std::map<uint64_t, absl::Status> out;
    while (reader->in_flight() > 0) {
      auto c = reader->WaitOne();
      EXPECT_TRUE(c.ok()) << c.status();
      if (!c.ok()) break;
      EXPECT_EQ(out.count(c->tag), 0u) << "tag completed twice: " << c->tag;
      out[c->tag] = c->status;
    }
    return out;
  }

  static testing::ScratchDir* dir_;
  static std::string path_;
  File file_;
};

testing::ScratchDir* BatchReaderTest::dir_ = nullptr;
std::string BatchReaderTest::path_;

#define MAKE_READER_OR_SKIP(var, qd, chunk)             \
  auto var = MakeReader(qd, chunk);                     \
  if (var == nullptr && !HasFailure()) {                \
    GTEST_SKIP() << "io_uring refused on this machine"; \
  }                                                     \
  ASSERT_NE(var, nullptr)

TEST_P(BatchReaderTest, ManyRandomAlignedReadsOfMixedSizes) {
  MAKE_READER_OR_SKIP(reader, 8, 256 << 10);
  std::mt19937_64 rng(42);
  constexpr int kReads = 100;
  std::vector<ReadRequest> reqs;
  std::vector<AlignedBuffer> bufs;
  for (int i = 0; i < kReads; ++i) {
    // 4 KiB .. 1 MiB, so some requests split into up to 4 pieces.
    const uint64_t len = 4096 * (1 + rng() % 256);
    const uint64_t off =
        4096 * (rng() % ((AlignDown(kFileSize) - len) / 4096 + 1));
    auto b = AlignedBuffer::Allocate(len, false);
    ASSERT_TRUE(b.ok());
    reqs.push_back({&file_, off, len, b->data(), static_cast<uint64_t>(i)});
    bufs.push_back(std::move(*b));
  }
  // Submit in a few batches while earlier ones are still in flight.
  for (int start = 0; start < kReads; start += 25) {
    std::vector<ReadRequest> batch(reqs.begin() + start,
                                   reqs.begin() + start + 25);
    ASSERT_TRUE(reader->Submit(batch).ok());
  }
  EXPECT_EQ(reader->in_flight(), static_cast<size_t>(kReads));
  auto done = Drain(reader.get());
  ASSERT_EQ(done.size(), static_cast<size_t>(kReads));
  for (const ReadRequest& r : reqs) {
    ASSERT_TRUE(done[r.tag].ok()) << done[r.tag];
    ASSERT_EQ(FirstPatternMismatch(r.dst, r.length, r.offset), -1)
        << "tag " << r.tag << " offset " << r.offset << " len " << r.length;
  }
  EXPECT_EQ(reader->in_flight(), 0u);
}

TEST_P(BatchReaderTest, PollOneGathersWhatLandedWithoutBlocking) {
  MAKE_READER_OR_SKIP(reader, 4, 64 << 10);
  // Nothing in flight: nullopt, not an error (WaitOne's case is an error).
  auto none = reader->PollOne();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  // 12 reads of 256 KiB (4 pieces each, 4 pieces in flight): PollOne and
  // WaitOne together return each exactly once, PollOne never blocks, and
  // PollOne alone keeps the queue moving (it submits pieces as slots free).
  constexpr int kReads = 12;
  constexpr uint64_t kLen = 256 << 10;
  auto b = AlignedBuffer::Allocate(kReads * kLen, false);
  ASSERT_TRUE(b.ok());
  std::vector<ReadRequest> reqs;
  for (int i = 0; i < kReads; ++i) {
    reqs.push_back({&file_, i * kLen, kLen, b->data() + i * kLen,
                    static_cast<uint64_t>(i)});
  }
  ASSERT_TRUE(reader->Submit(reqs).ok());
  std::map<uint64_t, int> seen;
  auto first = reader->WaitOne();
  ASSERT_TRUE(first.ok()) << first.status();
  ++seen[first->tag];
  int polled = 0;
  while (reader->in_flight() > 0) {
    auto c = reader->PollOne();
    ASSERT_TRUE(c.ok()) << c.status();
    if (c->has_value()) {
      ASSERT_TRUE((*c)->status.ok()) << (*c)->status;
      ++seen[(*c)->tag];
      ++polled;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kReads));
  for (const auto& [tag, n] : seen) EXPECT_EQ(n, 1) << "tag " << tag;
  EXPECT_EQ(polled, kReads - 1);
  EXPECT_EQ(FirstPatternMismatch(b->data(), kReads * kLen, 0), -1);
  none = reader->PollOne();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_P(BatchReaderTest, LargeRequestSplitIntoManyPieces) {
  // 24 MiB in 1 MiB pieces with only 4 in flight: exercises the pending
  // queue refilling as pieces complete.
  MAKE_READER_OR_SKIP(reader, 4, 1 << 20);
  constexpr uint64_t kLen = 24ull << 20;
  auto b = AlignedBuffer::Allocate(kLen, false);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(reader->Submit({{&file_, 12288, kLen, b->data(), 7}}).ok());
  auto c = reader->WaitOne();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tag, 7u);
  ASSERT_TRUE(c->status.ok()) << c->status;
  EXPECT_EQ(FirstPatternMismatch(b->data(), kLen, 12288), -1);
  EXPECT_EQ(reader->in_flight(), 0u);
}

TEST_P(BatchReaderTest, TailBlockZeroFilledAndDuplicateTagsAllowed) {
  MAKE_READER_OR_SKIP(reader, 4, 8 << 20);
  const uint64_t last = AlignDown(kFileSize);
  auto b = AlignedBuffer::Allocate(2 * 12288, false);
  ASSERT_TRUE(b.ok());
  std::fill(b->data(), b->data() + b->size(), 0xEE);
  // The whole last 12 KiB, ending at the aligned-up EOF, twice, same tag.
  ASSERT_TRUE(reader
                  ->Submit({{&file_, last - 8192, 12288, b->data(), 1},
                            {&file_, last - 8192, 12288, b->data() + 12288, 1},
                            {&file_, 0, 0, nullptr, 2}})
                  .ok());
  int ones = 0;
  while (reader->in_flight() > 0) {
    auto c = reader->WaitOne();
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->status.ok()) << c->status;
    ones += c->tag == 1;
  }
  EXPECT_EQ(ones, 2);
  for (int copy = 0; copy < 2; ++copy) {
    const uint8_t* p = b->data() + copy * 12288;
    const uint64_t real = kFileSize - (last - 8192);
    EXPECT_EQ(FirstPatternMismatch(p, real, last - 8192), -1);
    for (uint64_t i = real; i < 12288; ++i) ASSERT_EQ(p[i], 0) << i;
  }
}

TEST_P(BatchReaderTest, MisalignedRequestRejectedNamingFileAndOffset) {
  MAKE_READER_OR_SKIP(reader, 4, 8 << 20);
  auto b = AlignedBuffer::Allocate(8192, false);
  ASSERT_TRUE(b.ok());
  absl::Status s = reader->Submit(
      {{&file_, 0, 4096, b->data(), 1}, {&file_, 4100, 4096, b->data(), 2}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(path_));
  EXPECT_THAT(s.message(), HasSubstr("offset 4100"));
  EXPECT_EQ(reader->in_flight(), 0u) << "no request of a bad batch queued";
  EXPECT_EQ(reader->Submit({{&file_, 0, 100, b->data(), 3}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reader->Submit({{nullptr, 0, 4096, b->data(), 4}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(BatchReaderTest, PastEofIsAnErrorNotAHang) {
  MAKE_READER_OR_SKIP(reader, 4, 8 << 20);
  auto b = AlignedBuffer::Allocate(1 << 20, false);
  ASSERT_TRUE(b.ok());
  absl::Status s =
      reader->Submit({{&file_, AlignDown(kFileSize), 1 << 20, b->data(), 1}});
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  auto c = reader->WaitOne();
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(BatchReaderTest, FileTruncatedUnderneathGivesDataLoss) {
  MAKE_READER_OR_SKIP(reader, 4, 64 << 10);
  const std::string path = dir_->File("shrinking.bin");
  ASSERT_TRUE(testing::WritePatternFile(path, 1 << 20).ok());
  auto f = File::Open(path, true);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(truncate(path.c_str(), 100 * 1024), 0);
  auto b = AlignedBuffer::Allocate(1 << 20, false);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(reader->Submit({{&*f, 0, 1 << 20, b->data(), 9}}).ok());
  auto c = reader->WaitOne();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tag, 9u);
  EXPECT_EQ(c->status.code(), absl::StatusCode::kDataLoss) << c->status;
  EXPECT_THAT(c->status.message(), HasSubstr(path));
}

TEST_P(BatchReaderTest, BufferedFileAcceptsUnalignedRequests) {
  MAKE_READER_OR_SKIP(reader, 4, 64 << 10);
  auto f = File::Open(path_, /*direct=*/false);
  ASSERT_TRUE(f.ok());
  std::vector<uint8_t> buf(300001);
  ASSERT_TRUE(reader->Submit({{&*f, 12345, buf.size(), buf.data(), 5}}).ok());
  auto c = reader->WaitOne();
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->status.ok()) << c->status;
  EXPECT_EQ(FirstPatternMismatch(buf.data(), buf.size(), 12345), -1);
}

INSTANTIATE_TEST_SUITE_P(Kinds, BatchReaderTest,
                         ::testing::Values(ReaderKind::kUring,
                                           ReaderKind::kPread,
                                           ReaderKind::kAuto),
                         [](const auto& info) {
                           switch (info.param) {
                             case ReaderKind::kUring:
                               return "Uring";
                             case ReaderKind::kPread:
                               return "Pread";
                             default:
                               return "Auto";
                           }
                         });

TEST(CreateBatchReaderTest, RejectsBadOptions) {
  EXPECT_FALSE(CreateBatchReader(ReaderKind::kPread, 0).ok());
  BatchReaderOptions o;
  o.chunk_bytes = 1000;
  EXPECT_FALSE(CreateBatchReader(ReaderKind::kAuto, o).ok());
}

TEST(CreateBatchReaderTest, NamesAndParsing) {
  auto p = CreateBatchReader(ReaderKind::kPread, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_STREQ((*p)->name(), "pread-pool");
  auto a = CreateBatchReader(ReaderKind::kAuto, 2);
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(std::string((*a)->name()),
              ::testing::AnyOf("io_uring", "pread-pool"));
  EXPECT_EQ(*ParseReaderKind("io_uring"), ReaderKind::kUring);
  EXPECT_EQ(*ParseReaderKind("PREAD"), ReaderKind::kPread);
  EXPECT_EQ(*ParseReaderKind("auto"), ReaderKind::kAuto);
  EXPECT_FALSE(ParseReaderKind("mmap").ok());
}

}  // namespace
}  // namespace flotilla::io
