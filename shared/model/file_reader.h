// A read-only file descriptor with positioned reads. Weight data is read with
// pread into caller buffers: no mmap (a 1.5 TB checkpoint does not fit in the
// address-space budget of every deployment, and a truncated file would turn
// into SIGBUS instead of an error) and no shared file offset, so one open
// descriptor serves any number of threads.
#ifndef FLOTILLA_SHARED_MODEL_FILE_READER_H_
#define FLOTILLA_SHARED_MODEL_FILE_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::model::internal {

class ReadOnlyFile {
 public:
  // Opens a regular file; errors name the path and the OS reason.
  static absl::StatusOr<ReadOnlyFile> Open(const std::string& path);

  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  const std::string& path() const { return path_; }
  // Size at open time; reads are checked against it.
  uint64_t size() const { return size_; }

  // Reads exactly `n` bytes at `offset`, retrying short reads and EINTR.
  // `what` (e.g. "tensor 'x'") is named in error messages with the path and
  // offset. Safe to call concurrently.
  absl::Status ReadAt(uint64_t offset, void* dst, size_t n,
                      absl::string_view what) const;

 private:
  ReadOnlyFile(int fd, std::string path, uint64_t size)
      : fd_(fd), path_(std::move(path)), size_(size) {}

  int fd_ = -1;
  std::string path_;
  uint64_t size_ = 0;
};

}  // namespace flotilla::model::internal

#endif  // FLOTILLA_SHARED_MODEL_FILE_READER_H_
