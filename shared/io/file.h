// RAII read-only file handle with positional reads, optionally O_DIRECT.
//
// Thread-safety: a File is immutable after Open(); ReadAt() uses pread and may
// be called concurrently from any number of threads.
#ifndef FLOTILLA_SHARED_IO_FILE_H_
#define FLOTILLA_SHARED_IO_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::io {

class File {
 public:
  File() = default;
  ~File();
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Opens `path` read-only. With `direct`, tries O_DIRECT first; if the
  // filesystem refuses it (EINVAL, e.g. tmpfs/overlay) the file is opened
  // buffered and direct() reports false, so callers can print that the page
  // cache is in play. Errors name the path and errno text.
  static absl::StatusOr<File> Open(const std::string& path, bool direct);
  // Opens `path` buffered for small exact reads of untrusted files (config,
  // safetensors headers and tensors, fingerprint samples): a regular file
  // only (base::OpenForRead); errors name the path.
  static absl::StatusOr<File> OpenRegular(const std::string& path);

  // Reads `length` bytes at `offset` into `dst`, looping over short reads
  // and EINTR. When direct(), offset, length and dst must be 4 KiB-aligned
  // (InvalidArgument otherwise). A read may run past EOF only into the final
  // partial 4 KiB block — i.e. offset + length <= ReadableEnd() — so that the
  // aligned-up read of a file's last bytes works; those bytes past size() are
  // zero-filled in dst. Anything further is OutOfRange. Errors name the path,
  // offset and length.
  absl::Status ReadAt(uint64_t offset, uint64_t length, void* dst) const;

  // Reads exactly `n` bytes at `offset`, never past size(): OutOfRange
  // otherwise. Errors name the path, `what` (e.g. "tensor 'x'"), the offset
  // and the length. For buffered files (OpenRegular, or Open without
  // O_DIRECT): FailedPrecondition on a direct() one.
  absl::Status ReadExact(uint64_t offset, void* dst, size_t n,
                         absl::string_view what) const;
  // size() rounded up to 4 KiB: the end of the last block a read may touch.
  uint64_t ReadableEnd() const;

  // Validates a read request against alignment (when direct()) and
  // ReadableEnd(); shared by ReadAt and the BatchReader implementations.
  absl::Status CheckRead(uint64_t offset, uint64_t length,
                         const void* dst) const;

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool direct() const { return direct_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  File(int fd, bool direct, uint64_t size, std::string path)
      : fd_(fd), direct_(direct), size_(size), path_(std::move(path)) {}
  void Close();

  int fd_ = -1;
  bool direct_ = false;
  uint64_t size_ = 0;  // Size at Open(); files are treated as immutable.
  std::string path_;
};

}  // namespace flotilla::io

#endif  // FLOTILLA_SHARED_IO_FILE_H_
