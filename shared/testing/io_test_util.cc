#include "shared/testing/io_test_util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/base/check.h"
#include "shared/io/batch_reader.h"

namespace flotilla::io::testing {

absl::Status UringAvailable() {
  return CreateBatchReader(ReaderKind::kUring, 1).status();
}
namespace {

constexpr long kTmpfsMagic = 0x01021994;

// True if `dir` is writable and a file there can be opened with O_DIRECT.
bool SupportsDirect(const std::string& dir) {
  if (dir.empty()) return false;
  const std::string probe =
      absl::StrCat(dir, "/.flotilla_odirect_probe_", getpid());
  const int fd = open(probe.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0600);
  if (fd < 0) return false;
  close(fd);
  unlink(probe.c_str());
  return true;
}

}  // namespace

int64_t FirstPatternMismatch(const uint8_t* data, uint64_t length,
                             uint64_t offset) {
  for (uint64_t i = 0; i < length; ++i) {
    if (data[i] != PatternByte(offset + i)) return static_cast<int64_t>(i);
  }
  return -1;
}

ScratchDir::ScratchDir() {
  std::vector<std::string> candidates;
  for (const char* env : {"TEST_TMPDIR", "TMPDIR"}) {
    if (const char* v = getenv(env); v != nullptr) candidates.push_back(v);
  }
  candidates.push_back("/var/tmp");
  candidates.push_back("/tmp");
  candidates.push_back(std::filesystem::current_path().string());
  for (const std::string& base : candidates) {
    if (!SupportsDirect(base)) continue;
    std::string tmpl = absl::StrCat(base, "/flotilla_io_test.XXXXXX");
    if (mkdtemp(tmpl.data()) != nullptr) {
      path_ = tmpl;
      return;
    }
  }
  // No O_DIRECT-capable scratch space at all is an environment error the
  // tests cannot work around.
  std::fprintf(stderr, "no directory supporting O_DIRECT found\n");
  FLOTILLA_CHECK(false);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ScratchDir::File(const std::string& name) const {
  return absl::StrCat(path_, "/", name);
}

absl::Status WritePatternFile(const std::string& path, uint64_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::InternalError(
        absl::StrCat("create ", path, ": ", std::strerror(errno)));
  }
  std::vector<uint8_t> chunk(1 << 20);
  for (uint64_t off = 0; off < size; off += chunk.size()) {
    const uint64_t n = std::min<uint64_t>(chunk.size(), size - off);
    for (uint64_t i = 0; i < n; ++i) chunk[i] = PatternByte(off + i);
    if (std::fwrite(chunk.data(), 1, n, f) != n) {
      std::fclose(f);
      return absl::InternalError(absl::StrCat("write ", path));
    }
  }
  if (std::fclose(f) != 0) {
    return absl::InternalError(absl::StrCat("close ", path));
  }
  return absl::OkStatus();
}

std::string TmpfsDir() {
  struct statfs sfs;
  if (statfs("/dev/shm", &sfs) == 0 && sfs.f_type == kTmpfsMagic &&
      access("/dev/shm", W_OK) == 0) {
    return "/dev/shm";
  }
  return "";
}

}  // namespace flotilla::io::testing
