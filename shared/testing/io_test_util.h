// Test helpers: a scratch directory on a filesystem that supports O_DIRECT,
// and files whose every byte is a known function of its offset, so a read
// that lands in the wrong place is caught.
#ifndef FLOTILLA_SHARED_TESTING_IO_TEST_UTIL_H_
#define FLOTILLA_SHARED_TESTING_IO_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace flotilla::io::testing {

// Byte stored at `offset` of a pattern file.
inline uint8_t PatternByte(uint64_t offset) {
  return static_cast<uint8_t>((offset * 0x9E3779B97F4A7C15ull) >> 56);
}

// Returns the index of the first byte of `data` (which holds file bytes
// starting at `offset`) that does not match the pattern, or -1.
int64_t FirstPatternMismatch(const uint8_t* data, uint64_t length,
                             uint64_t offset);

// A fresh directory on a disk that accepts O_DIRECT: $TEST_TMPDIR, $TMPDIR,
// /var/tmp, /tmp or the working directory (ctest runs in the build tree),
// whichever works first. Removed with its contents on destruction.
// OK when this process may use io_uring; else the reason (Unavailable),
// e.g. a container's seccomp profile refusing io_uring_setup with ENOSYS.
// For tests that force --reader uring to skip, with the reason, there.
absl::Status UringAvailable();

class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name.
  std::string File(const std::string& name) const;

 private:
  std::string path_;
};

// Writes a pattern file of `size` bytes at `path`.
absl::Status WritePatternFile(const std::string& path, uint64_t size);

// A tmpfs directory (refuses O_DIRECT) for fallback tests, or empty.
std::string TmpfsDir();

}  // namespace flotilla::io::testing

#endif  // FLOTILLA_SHARED_TESTING_IO_TEST_UTIL_H_
