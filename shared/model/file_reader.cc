#include "shared/model/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/base/open_file.h"
#include "shared/base/status_macros.h"

namespace flotilla::model::internal {
namespace {

absl::Status ErrnoError(int err, absl::string_view message) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(message, ": ", std::strerror(err)));
}

}  // namespace

absl::StatusOr<ReadOnlyFile> ReadOnlyFile::Open(const std::string& path) {
  // Regular files only, and no blocking on a FIFO (shared/base/open_file.h).
  FLOTILLA_ASSIGN_OR_RETURN(const int fd, base::OpenForRead(path));
  ReadOnlyFile file(fd, path, 0);  // owns fd from here on
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return ErrnoError(errno, absl::StrCat("cannot stat ", path));
  }
  file.size_ = static_cast<uint64_t>(st.st_size);
  return file;
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      size_(other.size_) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    size_ = other.size_;
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status ReadOnlyFile::ReadAt(uint64_t offset, void* dst, size_t n,
                                  absl::string_view what) const {
  auto context = [&] {
    return absl::StrCat(path_, ": reading ", what.empty() ? "data" : what, " (",
                        n, " bytes at offset ", offset, ")");
  };
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(context(), ": file is not open"));
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
    size_t want = std::min(n - done, kMaxChunk);
    ssize_t got =
        ::pread(fd_, out + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, context());
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

}  // namespace flotilla::model::internal
