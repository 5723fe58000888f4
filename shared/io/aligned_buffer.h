// Page-aligned, move-only byte buffers for O_DIRECT reads, and the arithmetic
// that widens an arbitrary byte range to the 4 KiB granularity O_DIRECT needs.
//
// Thread-compatibility: an AlignedBuffer is a plain owned allocation; share it
// across threads only with external synchronisation.
#ifndef FLOTILLA_SHARED_IO_ALIGNED_BUFFER_H_
#define FLOTILLA_SHARED_IO_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace flotilla::io {

// O_DIRECT on ext4/xfs over NVMe and virtio needs buffer address, file offset
// and length to be multiples of the logical block size; 4 KiB covers every
// device we target (512 B and 4 KiB sectors).
inline constexpr size_t kDirectIoAlignment = 4096;

// Buffers at least this large are 2 MiB-aligned and backed by transparent
// huge pages where the kernel allows (see AlignedBuffer::Allocate).
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Rounds `v` up / down to a multiple of kDirectIoAlignment.
constexpr uint64_t AlignDown(uint64_t v) {
  return v & ~static_cast<uint64_t>(kDirectIoAlignment - 1);
}
constexpr uint64_t AlignUp(uint64_t v) {
  return AlignDown(v + kDirectIoAlignment - 1);
}
constexpr bool IsAligned(uint64_t v) { return (v % kDirectIoAlignment) == 0; }

// A 4 KiB-aligned range covering a requested byte range.
struct AlignedRange {
  uint64_t offset = 0;  // Aligned file offset (<= requested offset).
  uint64_t length = 0;  // Aligned length (multiple of 4 KiB, covers request).
  uint64_t skip = 0;    // Requested offset - aligned offset; the requested
                        // bytes start at buffer + skip.
};

// Expands [offset, offset + length) outwards to 4 KiB boundaries. A zero
// length yields a zero-length range at AlignDown(offset).
constexpr AlignedRange AlignForDirectIo(uint64_t offset, uint64_t length) {
  AlignedRange r;
  r.offset = AlignDown(offset);
  r.skip = offset - r.offset;
  r.length = length == 0 ? 0 : AlignUp(offset + length) - r.offset;
  return r;
}

// Owns `size()` bytes starting at a 4 KiB-aligned address (mmap'd, so also
// page-aligned and returned to the OS on destruction). Zero-size buffers are
// valid and have data() == nullptr.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // Allocates `bytes` rounded up to a whole number of pages (size() reports
  // the requested `bytes`). From kHugePageBytes up the buffer starts on a
  // 2 MiB boundary and is advised to use transparent huge pages (fewer,
  // larger block requests for O_DIRECT reads); it maps no more bytes. With
  // `prefault`, every page is faulted in now (MAP_POPULATE, then a touch loop
  // as a fallback) because a first touch costs a page fault, which would
  // otherwise land inside the timed read path. Returns ResourceExhausted
  // when the mapping fails.
  static absl::StatusOr<AlignedBuffer> Allocate(size_t bytes, bool prefault);

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Bytes actually mapped (size() rounded up to a page).
  size_t capacity() const { return capacity_; }

 private:
  AlignedBuffer(uint8_t* data, size_t size, size_t capacity)
      : data_(data), size_(size), capacity_(capacity) {}
  void Reset();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace flotilla::io

#endif  // FLOTILLA_SHARED_IO_ALIGNED_BUFFER_H_
