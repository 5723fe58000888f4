#include "shared/io/aligned_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace flotilla::io {
namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

AlignedBuffer::~AlignedBuffer() { Reset(); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void AlignedBuffer::Reset() {
  if (data_ != nullptr) munmap(data_, capacity_);
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
}

absl::StatusOr<AlignedBuffer> AlignedBuffer::Allocate(size_t bytes,
                                                      bool prefault) {
  if (bytes == 0) return AlignedBuffer();
  const size_t page = PageSize();
  // mmap gives page alignment; pages are never smaller than 4 KiB on the
  // platforms we run on, which this keeps honest.
  static_assert(kDirectIoAlignment == 4096);
  const size_t capacity = (bytes + page - 1) / page * page;
  if (capacity < bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("AlignedBuffer: size ", bytes, " overflows"));
  }
  // Buffers of a huge page or more start on a 2 MiB boundary and are
  // advised to use transparent huge pages: an O_DIRECT read into physically
  // contiguous memory leaves the block layer as one large request instead
  // of one per ~254 scattered 4 KiB pages (bench/measurements.md). The
  // advice must precede the first touch, so MAP_POPULATE is not used for
  // them.
  const bool huge = capacity >= kHugePageBytes;
  const size_t slack = huge ? kHugePageBytes : 0;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (prefault && !huge) flags |= MAP_POPULATE;
  void* p =
      mmap(nullptr, capacity + slack, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("AlignedBuffer: mmap of ", capacity,
                     " bytes failed: ", std::strerror(errno)));
  }
  auto* data = static_cast<uint8_t*>(p);
  if (huge) {
    // Keep the 2 MiB-aligned [data, data + capacity) and unmap the rest, so
    // the buffer maps no more than a 4 KiB-page one would.
    const uintptr_t at = reinterpret_cast<uintptr_t>(data);
    const size_t head = (kHugePageBytes - at % kHugePageBytes) % kHugePageBytes;
    if (head > 0) munmap(data, head);
    if (slack - head > 0) munmap(data + head + capacity, slack - head);
    data += head;
    // Best effort: without THP (or with it off) the pages are just 4 KiB.
    madvise(data, capacity, MADV_HUGEPAGE);
  }
  if (prefault) {
    // MAP_POPULATE is best effort (it silently stops under memory pressure),
    // so touch one byte per page too; on already-populated pages this costs
    // only a TLB walk. Volatile keeps the compiler from eliding the stores.
    volatile uint8_t* v = data;
    for (size_t off = 0; off < capacity; off += page) v[off] = 0;
  }
  return AlignedBuffer(data, bytes, capacity);
}

}  // namespace flotilla::io
