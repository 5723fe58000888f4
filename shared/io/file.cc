#include "shared/io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/base/open_file.h"
#include "shared/base/status_macros.h"
#include "shared/io/aligned_buffer.h"

namespace flotilla::io {
namespace {

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(what, ": ", std::strerror(err)));
}

}  // namespace

File::~File() { Close(); }

File::File(File&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      direct_(std::exchange(other.direct_, false)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    direct_ = std::exchange(other.direct_, false);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

void File::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::StatusOr<File> File::OpenRegular(const std::string& path) {
  FLOTILLA_ASSIGN_OR_RETURN(const int fd, base::OpenForRead(path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoError(err, absl::StrCat("cannot stat ", path));
  }
  return File(fd, /*direct=*/false, static_cast<uint64_t>(st.st_size), path);
}

absl::Status File::ReadExact(uint64_t offset, void* dst, size_t n,
                             absl::string_view what) const {
  auto context = [&] {
    return absl::StrCat(path_, ": reading ", what.empty() ? "data" : what, " (",
                        n, " bytes at offset ", offset, ")");
  };
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(context(), ": file is not open"));
  }
  if (direct_) {
    return absl::FailedPreconditionError(
        absl::StrCat(context(), ": exact reads need a buffered file"));
  }
  if (offset > size_ || n > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat(
        context(), ": extends past the end of the file (", size_, " bytes)"));
  }
  // Linux transfers at most ~2 GiB per call; larger tensors (a 163840 x 7168
  // BF16 embedding is 2.3 GB) take several.
  constexpr size_t kMaxChunk = size_t{1} << 30;
  char* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    const size_t want = std::min(n - done, kMaxChunk);
    const ssize_t got =
        ::pread(fd_, out + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      return absl::Status(absl::ErrnoToStatusCode(err),
                          absl::StrCat(context(), ": ", std::strerror(err)));
    }
    if (got == 0) {
      // The file shrank after open (size_ was checked above).
      return absl::DataLossError(absl::StrCat(
          context(), ": unexpected end of file after ", done, " bytes"));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::StatusOr<File> File::Open(const std::string& path, bool direct) {
  int fd = -1;
  bool is_direct = false;
  if (direct) {
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_DIRECT);
    // EINVAL means the filesystem does not do O_DIRECT (tmpfs, some
    // overlays): fall back to buffered reads rather than failing, and let
    // the caller report direct() == false.
    if (fd >= 0) {
      is_direct = true;
    } else if (errno != EINVAL) {
      return ErrnoError(errno, absl::StrCat("open(O_DIRECT) ", path));
    }
  }
  if (fd < 0) {
    // O_NONBLOCK: a FIFO must not block the open; cleared below.
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoError(err, absl::StrCat("fstat ", path));
  }
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a regular file or block device"));
  }
  if (const int flags = fcntl(fd, F_GETFL); flags >= 0) {
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode)) {
    const off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0) {
      const int err = errno;
      close(fd);
      return ErrnoError(err, absl::StrCat("lseek ", path));
    }
    size = static_cast<uint64_t>(end);
  }
  return File(fd, is_direct, size, path);
}

uint64_t File::ReadableEnd() const { return AlignUp(size_); }

absl::Status File::CheckRead(uint64_t offset, uint64_t length,
                             const void* dst) const {
  if (fd_ < 0) return absl::FailedPreconditionError("read from a closed File");
  if (dst == nullptr && length > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "read of ", path_, " at offset ", offset, " has a null destination"));
  }
  if (direct_ && (!IsAligned(offset) || !IsAligned(length) ||
                  !IsAligned(reinterpret_cast<uintptr_t>(dst)))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "O_DIRECT read of ", path_, " at offset ", offset, " length ", length,
        " dst ", absl::Hex(reinterpret_cast<uintptr_t>(dst)),
        " is not 4096-aligned (use AlignForDirectIo and AlignedBuffer)"));
  }
  if (offset > ReadableEnd() || length > ReadableEnd() - offset) {
    return absl::OutOfRangeError(
        absl::StrCat("read of ", path_, " at offset ", offset, " length ",
                     length, " runs past end of file (size ", size_, ")"));
  }
  return absl::OkStatus();
}

absl::Status File::ReadAt(uint64_t offset, uint64_t length, void* dst) const {
  FLOTILLA_RETURN_IF_ERROR(CheckRead(offset, length, dst));
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = pread(fd_, out + done, length - done,
                            static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(
          errno, absl::StrCat("pread ", path_, " at offset ", offset + done,
                              " length ", length - done));
    }
    if (n == 0) break;  // EOF: handled below.
    done += static_cast<uint64_t>(n);
    // A direct read that stops short must resume on an aligned offset; the
    // kernel only returns partial blocks at EOF, which ends the loop next.
  }
  if (done < length) {
    // Only the tail past size_ (inside the last 4 KiB block) may be missing;
    // CheckRead() already bounded the request to ReadableEnd().
    if (offset + done < size_) {
      return absl::DataLossError(absl::StrCat(
          "short read of ", path_, " at offset ", offset, " length ", length,
          ": got ", done, " bytes before EOF at ", offset + done,
          " but size is ", size_, " (file truncated while open?)"));
    }
    std::memset(out + done, 0, length - done);
  }
  return absl::OkStatus();
}

}  // namespace flotilla::io
