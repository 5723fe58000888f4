// Disk measurements for `flotilla-tool doctor`: a scratch file (or a model
// shard, read-only) probed with O_DIRECT random reads.
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/batch_reader.h"
#include "shared/io/file.h"
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

// Reads `path` front to back (wrapping at the end) in kChunk reads with
// `qd` in flight, the way a whole trunk file streams, for `seconds`.
absl::StatusOr<io::DiskProbeResult> ProbeSequential(const std::string& path,
                                                    int qd, double seconds) {
  FLOTILLA_ASSIGN_OR_RETURN(io::File file, io::File::Open(path, true));
  if (file.size() < kChunk * qd) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is too small for sequential reads of ", kChunk, " bytes"));
  }
  io::BatchReaderOptions options;
  options.queue_depth = qd;
  options.chunk_bytes = kChunk;
  FLOTILLA_ASSIGN_OR_RETURN(
      auto reader, io::CreateBatchReader(io::ReaderKind::kAuto, options));
  FLOTILLA_ASSIGN_OR_RETURN(io::AlignedBuffer buf,
                            io::AlignedBuffer::Allocate(kChunk * qd, true));
  io::DiskProbeResult r;
  r.read_size = kChunk;
  r.queue_depth = qd;
  r.direct = file.direct();
  r.reader = reader->name();
  const uint64_t chunks = file.size() / kChunk;
  uint64_t next = 0;
  auto submit = [&](uint64_t slot) {
    const uint64_t offset = (next++ % chunks) * kChunk;
    return reader->Submit(
        {{&file, offset, kChunk, buf.data() + slot * kChunk, slot}});
  };
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  for (int slot = 0; slot < qd; ++slot) FLOTILLA_RETURN_IF_ERROR(submit(slot));
  bool more = true;
  while (reader->in_flight() > 0) {
    FLOTILLA_ASSIGN_OR_RETURN(io::ReadCompletion c, reader->WaitOne());
    FLOTILLA_RETURN_IF_ERROR(c.status);
    r.bytes += kChunk;
    ++r.reads;
    more = more &&
           std::chrono::duration<double>(Clock::now() - t0).count() < seconds;
    if (more) FLOTILLA_RETURN_IF_ERROR(submit(c.tag));
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.gb_per_s = r.seconds > 0 ? r.bytes / r.seconds / 1e9 : 0;
  return r;
}

}  // namespace

double DiskMeasurements::RandomGbPerS(uint64_t read_size, int qd) const {
  const io::DiskProbeResult* best = nullptr;
  for (const io::DiskProbeResult& r : random) {
    if (r.read_size != io::AlignUp(read_size) || r.queue_depth > qd) continue;
    if (best == nullptr || r.queue_depth > best->queue_depth) best = &r;
  }
  return best ? best->gb_per_s : 0;
}

absl::StatusOr<DiskMeasurements> MeasureDisk(
    const std::string& probe_file, const std::string& scratch_dir,
    uint64_t scratch_bytes, const std::vector<uint64_t>& read_sizes,
    const std::vector<int>& queue_depths, double seconds, FILE* log) {
  DiskMeasurements m;
  ScratchFile scratch;
  if (!probe_file.empty()) {
    m.file = probe_file;
  } else {
    struct statvfs vfs;
    if (::statvfs(scratch_dir.c_str(), &vfs) != 0) {
      return absl::NotFoundError(absl::StrCat("cannot measure the disk at ",
                                              scratch_dir, ": ",
                                              std::strerror(errno)));
    }
    const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    uint64_t bytes = io::AlignUp(scratch_bytes);
    if (avail < bytes + kFreeMargin) {
      bytes =
          avail > kFreeMargin ? io::AlignDown((avail - kFreeMargin) / 2) : 0;
    }
    uint64_t largest = kChunk;
    for (uint64_t r : read_sizes) largest = std::max(largest, r);
    if (bytes < std::max(kMinScratch, 2 * largest)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          scratch_dir, " has ", io::FormatBytes(avail),
          " free: too little for a scratch file to measure the disk (pass "
          "--path on the disk that will hold the model)"));
    }
    FLOTILLA_RETURN_IF_ERROR(scratch.Create(scratch_dir, bytes, log));
    m.file = scratch.path();
    m.scratch = true;
  }
  for (uint64_t size : read_sizes) {
    for (int qd : queue_depths) {
      FLOTILLA_ASSIGN_OR_RETURN(
          io::DiskProbeResult r,
          io::ProbeRandomReads(m.file, size, qd, seconds, 0));
      if (log != nullptr) {
        std::fprintf(log, "doctor: %s\n", io::FormatProbeResult(r).c_str());
      }
      m.random.push_back(r);
    }
  }
  // Trunk regions are streamed whole, one after another (tens of MB to
  // GBs): large sequential reads with a few in flight, like the prefetch
  // ring's.
  FLOTILLA_ASSIGN_OR_RETURN(m.large, ProbeSequential(m.file, 4, seconds));
  if (log != nullptr) {
    std::fprintf(log,
                 "doctor: sequential 64 MiB x QD4: %.2f GB/s (%s in %.2f s)\n",
                 m.large.gb_per_s, io::FormatBytes(m.large.bytes).c_str(),
                 m.large.seconds);
  }
  return m;
}

}  // namespace flotilla::tools
