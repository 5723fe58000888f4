// Opening untrusted paths for reading. A model folder comes from strangers:
// a FIFO named like a shard or an index would block open(2) until some
// writer appears (forever). So the file is opened with O_NONBLOCK, which a
// FIFO or device honours at open and a regular file ignores, checked with
// fstat before anything reads it, and O_NONBLOCK is cleared again.
#ifndef FLOTILLA_SHARED_BASE_OPEN_FILE_H_
#define FLOTILLA_SHARED_BASE_OPEN_FILE_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace flotilla::base {

// A read-only fd of `path` (with `flags` added, e.g. O_DIRECT), which must
// be a regular file (or a block device when `allow_block_device`). Errors
// name the path: the open's errno, or "not a regular file (a FIFO)".
inline absl::StatusOr<int> OpenForRead(const std::string& path, int flags = 0,
                                       bool allow_block_device = false) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | flags);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    return absl::Status(
        absl::ErrnoToStatusCode(err),
        absl::StrCat("cannot open ", path, ": ", std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::Status(
        absl::ErrnoToStatusCode(err),
        absl::StrCat("cannot stat ", path, ": ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode) && !(allow_block_device && S_ISBLK(st.st_mode))) {
    ::close(fd);
    const char* kind = S_ISFIFO(st.st_mode)   ? " (a FIFO)"
                       : S_ISDIR(st.st_mode)  ? " (a directory)"
                       : S_ISCHR(st.st_mode)  ? " (a character device)"
                       : S_ISSOCK(st.st_mode) ? " (a socket)"
                                              : "";
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file", kind));
  }
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

}  // namespace flotilla::base

#endif  // FLOTILLA_SHARED_BASE_OPEN_FILE_H_
