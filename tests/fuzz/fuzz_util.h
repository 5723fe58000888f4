// Shared by the libFuzzer harnesses (tests/fuzz, scripts/fuzz.sh): the
// input as a regular file, for parsers that take a path and check that
// what they open is a regular file (a memfd is one, and costs no disk).
#ifndef FLOTILLA_TESTS_FUZZ_FUZZ_UTIL_H_
#define FLOTILLA_TESTS_FUZZ_FUZZ_UTIL_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace flotilla::fuzz {

class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();  // the harness cannot run at all
    for (size_t done = 0; done < size;) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace flotilla::fuzz

#endif  // FLOTILLA_TESTS_FUZZ_FUZZ_UTIL_H_
