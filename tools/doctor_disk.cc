// Disk measurements for `flotilla-tool doctor`: a scratch file (or the
// model's shards, read-only) probed with O_DIRECT random reads
// (io::ProbeRandomReads, checked against fio in docs/streaming.md).
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/disk_probe.h"
#include "shared/io/memory_budget.h"
#include "tools/doctor.h"
#include "tools/pack_io.h"

namespace flotilla::tools {
namespace {

constexpr uint64_t kChunk = uint64_t{64} << 20;
constexpr uint64_t kMinScratch = uint64_t{256} << 20;
// Left free on the disk: doctor must not be what fills it.
constexpr uint64_t kFreeMargin = uint64_t{1} << 30;

// The scratch file is removed on Ctrl-C too: a 3 GB leftover is exactly the
// kind of surprise a diagnostic tool must not cause.
char g_scratch_path[4096];
std::atomic<bool> g_scratch_live{false};

void RemoveOnSignal(int sig) {
  if (g_scratch_live.load()) ::unlink(g_scratch_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

class ScratchFile {
 public:
  ScratchFile() = default;
  ~ScratchFile() {
    if (!path_.empty()) {
      ::unlink(path_.c_str());
      g_scratch_live = false;
    }
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Writes `bytes` of non-repeating data (zeros or repeats could be
  // compressed, deduplicated or left sparse by the storage, and then read
  // faster than real weights).
  absl::Status Create(const std::string& dir, uint64_t bytes, FILE* log) {
    path_ = absl::StrCat(dir, "/.flotilla-doctor-", ::getpid(), ".tmp");
    std::snprintf(g_scratch_path, sizeof(g_scratch_path), "%s", path_.c_str());
    g_scratch_live = true;
    std::signal(SIGINT, RemoveOnSignal);
    std::signal(SIGTERM, RemoveOnSignal);
    FLOTILLA_ASSIGN_OR_RETURN(OutFile out,
                              OutFile::Open(path_, bytes, /*truncate=*/true));
    FLOTILLA_ASSIGN_OR_RETURN(io::AlignedBuffer buf,
                              io::AlignedBuffer::Allocate(kChunk, false));
    uint64_t x = 0x9e3779b97f4a7c15ull;
    uint64_t* words = reinterpret_cast<uint64_t*>(buf.data());
    for (uint64_t i = 0; i < kChunk / 8; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      words[i] = x;
    }
    if (log != nullptr) {
      std::fprintf(log, "doctor: writing a %s scratch file in %s ...\n",
                   io::FormatBytes(bytes).c_str(), dir.c_str());
    }
    for (uint64_t off = 0; off < bytes; off += kChunk) {
      // Stamp each 4 KiB block with its offset so no two blocks are equal.
      for (uint64_t b = 0; b < kChunk; b += io::kDirectIoAlignment) {
        words[b / 8] = off + b;
      }
      FLOTILLA_RETURN_IF_ERROR(
          out.Write(buf.data(), std::min(kChunk, bytes - off), off));
    }
    return out.Sync();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

double DiskMeasurements::RandomGbPerS(uint64_t read_size, int qd,
                                      bool huge_pages) const {
  const io::DiskProbeResult* best = nullptr;
  for (size_t i = 0; i < random.size(); ++i) {
    const io::DiskProbeResult& r = random[i];
    if (r.read_size != io::AlignUp(read_size) || r.queue_depth > qd ||
        random_huge[i] != huge_pages) {
      continue;
    }
    if (best == nullptr || r.queue_depth > best->queue_depth) best = &r;
  }
  return best ? best->gb_per_s : 0;
}

absl::StatusOr<DiskMeasurements> MeasureDisk(
    const std::vector<std::string>& probe_files, const std::string& scratch_dir,
    uint64_t scratch_bytes, const std::vector<DiskProbeSpec>& specs,
    double seconds, FILE* log) {
  DiskMeasurements m;
  ScratchFile scratch;
  if (!probe_files.empty()) {
    m.files = probe_files;
  } else {
    struct statvfs vfs;
    if (::statvfs(scratch_dir.c_str(), &vfs) != 0) {
      return absl::NotFoundError(absl::StrCat("cannot measure the disk at ",
                                              scratch_dir, ": ",
                                              std::strerror(errno)));
    }
    const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    uint64_t largest = 0;
    for (const DiskProbeSpec& spec : specs) {
      largest = std::max(largest, io::AlignUp(spec.read_size));
    }
    // The file must hold two of the largest probe reads; said as such when
    // it is the asked size that is short, not the disk.
    const uint64_t minimum = std::max(kMinScratch, 2 * largest);
    uint64_t bytes = io::AlignUp(scratch_bytes);
    if (bytes < minimum) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--scratch-size ", io::FormatBytesBinary(scratch_bytes),
          " is below the minimum scratch file of ",
          io::FormatBytesBinary(minimum), " (twice the largest probe read, ",
          io::FormatBytesBinary(largest), ")"));
    }
    if (avail < bytes + kFreeMargin) {
      bytes =
          avail > kFreeMargin ? io::AlignDown((avail - kFreeMargin) / 2) : 0;
    }
    if (bytes < minimum) {
      return absl::ResourceExhaustedError(absl::StrCat(
          scratch_dir, " has ", io::FormatBytes(avail),
          " free: too little for a scratch file of at least ",
          io::FormatBytes(minimum),
          " to measure the disk (pass --path on the disk that will hold the "
          "model)"));
    }
    FLOTILLA_RETURN_IF_ERROR(scratch.Create(scratch_dir, bytes, log));
    m.files = {scratch.path()};
    m.scratch = true;
  }
  uint64_t file_bytes = 0;
  for (const std::string& f : m.files) {
    std::error_code ec;
    file_bytes += std::filesystem::file_size(f, ec);
  }
  for (const DiskProbeSpec& spec : specs) {
    for (int qd : spec.queue_depths) {
      // With more than half the file in flight at once the "random" reads
      // are nearly all of it; skip such depths (never QD1).
      if (qd > 1 && 2 * qd * io::AlignUp(spec.read_size) > file_bytes) {
        continue;
      }
      io::DiskProbeOptions o;
      o.read_size = spec.read_size;
      o.queue_depth = qd;
      o.seconds = seconds;
      o.huge_pages = spec.huge_pages;
      FLOTILLA_ASSIGN_OR_RETURN(io::DiskProbeResult r,
                                io::ProbeRandomReads(m.files, o));
      if (log != nullptr) {
        std::fprintf(log, "doctor: %s\n", io::FormatProbeResult(r).c_str());
      }
      m.random.push_back(r);
      m.random_huge.push_back(spec.huge_pages);
    }
  }
  return m;
}

}  // namespace flotilla::tools
