#include "shared/io/aligned_buffer.h"

#include <cstdint>
#include <utility>

#include "gtest/gtest.h"

namespace flotilla::io {
namespace {

TEST(AlignForDirectIoTest, AlreadyAligned) {
  const AlignedRange r = AlignForDirectIo(8192, 4096);
  EXPECT_EQ(r.offset, 8192u);
  EXPECT_EQ(r.length, 4096u);
  EXPECT_EQ(r.skip, 0u);
}

TEST(AlignForDirectIoTest, ExpandsBothEnds) {
  // 1.25 MB expert at an odd offset.
  const AlignedRange r = AlignForDirectIo(10000, 1250000);
  EXPECT_EQ(r.offset, 8192u);
  EXPECT_EQ(r.skip, 10000u - 8192u);
  EXPECT_EQ(r.length % kDirectIoAlignment, 0u);
  EXPECT_GE(r.offset + r.length, 10000u + 1250000u);
  EXPECT_LT(r.offset + r.length, 10000u + 1250000u + kDirectIoAlignment);
}

TEST(AlignForDirectIoTest, SmallReadInsideOneBlock) {
  const AlignedRange r = AlignForDirectIo(4097, 10);
  EXPECT_EQ(r.offset, 4096u);
  EXPECT_EQ(r.length, 4096u);
  EXPECT_EQ(r.skip, 1u);
}

TEST(AlignForDirectIoTest, ReadCrossingABlockBoundary) {
  const AlignedRange r = AlignForDirectIo(4095, 2);
  EXPECT_EQ(r.offset, 0u);
  EXPECT_EQ(r.length, 8192u);
  EXPECT_EQ(r.skip, 4095u);
}

TEST(AlignForDirectIoTest, ZeroLength) {
  const AlignedRange r = AlignForDirectIo(5000, 0);
  EXPECT_EQ(r.offset, 4096u);
  EXPECT_EQ(r.length, 0u);
  EXPECT_EQ(r.skip, 904u);
}

TEST(AlignForDirectIoTest, LargeOffsets) {
  const uint64_t off = (1ull << 40) + 123;  // Beyond 32 bits: a 1.5 TB model.
  const AlignedRange r = AlignForDirectIo(off, 1);
  EXPECT_EQ(r.offset, 1ull << 40);
  EXPECT_EQ(r.skip, 123u);
  EXPECT_EQ(r.length, 4096u);
}

TEST(AlignHelpersTest, UpDownIsAligned) {
  EXPECT_EQ(AlignUp(0), 0u);
  EXPECT_EQ(AlignUp(1), 4096u);
  EXPECT_EQ(AlignUp(4096), 4096u);
  EXPECT_EQ(AlignDown(4095), 0u);
  EXPECT_TRUE(IsAligned(0));
  EXPECT_TRUE(IsAligned(1 << 20));
  EXPECT_FALSE(IsAligned(512));
}

TEST(AlignedBufferTest, AllocatesAlignedWritableMemory) {
  for (bool prefault : {false, true}) {
    auto buf = AlignedBuffer::Allocate(3 * 4096 + 5, prefault);
    ASSERT_TRUE(buf.ok()) << buf.status();
    EXPECT_EQ(buf->size(), 3u * 4096 + 5);
    EXPECT_GE(buf->capacity(), buf->size());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % kDirectIoAlignment,
              0u);
    // Fresh anonymous memory reads as zero and is writable to the end.
    EXPECT_EQ(buf->data()[0], 0);
    buf->data()[buf->size() - 1] = 0xAB;
    EXPECT_EQ(buf->data()[buf->size() - 1], 0xAB);
  }
}

TEST(AlignedBufferTest, ZeroSizeIsEmpty) {
  auto buf = AlignedBuffer::Allocate(0, true);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(buf->data(), nullptr);
  EXPECT_EQ(buf->size(), 0u);
}

TEST(AlignedBufferTest, MoveTransfersOwnership) {
  auto buf = AlignedBuffer::Allocate(8192, false);
  ASSERT_TRUE(buf.ok());
  uint8_t* p = buf->data();
  p[0] = 7;
  AlignedBuffer a = std::move(*buf);
  EXPECT_EQ(buf->data(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(a.data(), p);
  AlignedBuffer b;
  b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[0], 7);
  EXPECT_EQ(b.size(), 8192u);
}

// Buffers of 2 MiB and more start on a huge-page boundary (so THP can back
// them) yet map only their page-rounded size; smaller ones stay as they were.
TEST(AlignedBufferTest, LargeBuffersAreHugePageAligned) {
  for (size_t bytes : {kHugePageBytes, kHugePageBytes * 3 + 4096 * 5 + 17}) {
    auto buf = AlignedBuffer::Allocate(bytes, /*prefault=*/true);
    ASSERT_TRUE(buf.ok()) << buf.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % kHugePageBytes, 0u);
    EXPECT_EQ(buf->capacity(), AlignUp(bytes));
    // Every byte is usable (and was faulted in without crashing).
    buf->data()[0] = 1;
    buf->data()[bytes - 1] = 2;
    EXPECT_EQ(buf->data()[bytes - 1], 2);
  }
  auto small = AlignedBuffer::Allocate(kHugePageBytes - 4096, true);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->capacity(), kHugePageBytes - 4096);
}

TEST(AlignedBufferTest, HugeAllocationFailsCleanly) {
  auto buf = AlignedBuffer::Allocate(size_t{1} << 62, true);
  EXPECT_FALSE(buf.ok());
  EXPECT_EQ(buf.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace flotilla::io
