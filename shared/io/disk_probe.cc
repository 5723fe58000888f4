#include "shared/io/disk_probe.h"

#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/base/elapsed.h"
#include "shared/base/status_macros.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/memory_budget.h"

namespace flotilla::io {
namespace {

using Clock = std::chrono::steady_clock;

using base::Seconds;

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * v.size()));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(what, ": ", std::strerror(err)));
}

// Written bytes by FIEMAP; Unimplemented when the filesystem has no FIEMAP.
absl::StatusOr<uint64_t> WrittenBytesByFiemap(const File& file) {
  constexpr unsigned kExtents = 256;
  std::vector<uint8_t> storage(sizeof(fiemap) +
                               kExtents * sizeof(fiemap_extent));
  auto* fm = reinterpret_cast<fiemap*>(storage.data());
  uint64_t written = 0;
  uint64_t start = 0;
  while (start < file.size()) {
    std::memset(storage.data(), 0, storage.size());
    fm->fm_start = start;
    fm->fm_length = file.size() - start;
    // SYNC: delayed-allocation data still in the page cache gets its extents.
    fm->fm_flags = FIEMAP_FLAG_SYNC;
    fm->fm_extent_count = kExtents;
    if (ioctl(file.fd(), FS_IOC_FIEMAP, fm) != 0) {
      const int err = errno;
      if (err == EOPNOTSUPP || err == ENOTTY || err == EINVAL) {
        return absl::UnimplementedError("no FIEMAP");
      }
      return ErrnoError(err, absl::StrCat("FIEMAP ", file.path()));
    }
    if (fm->fm_mapped_extents == 0) break;
    bool last = false;
    for (unsigned i = 0; i < fm->fm_mapped_extents; ++i) {
      const fiemap_extent& e = fm->fm_extents[i];
      const uint64_t lo = std::max<uint64_t>(e.fe_logical, start);
      const uint64_t hi =
          std::min<uint64_t>(e.fe_logical + e.fe_length, file.size());
      if (hi > lo && (e.fe_flags & FIEMAP_EXTENT_UNWRITTEN) == 0) {
        written += hi - lo;
      }
      start = std::max<uint64_t>(start, e.fe_logical + e.fe_length);
      last = last || (e.fe_flags & FIEMAP_EXTENT_LAST) != 0;
    }
    if (last) break;
  }
  return std::min(written, file.size());
}

// Written bytes by SEEK_DATA/SEEK_HOLE; Unimplemented when unsupported.
absl::StatusOr<uint64_t> WrittenBytesBySeek(const File& file) {
  const off_t size = static_cast<off_t>(file.size());
  uint64_t written = 0;
  off_t pos = 0;
  while (pos < size) {
    const off_t data = lseek(file.fd(), pos, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // Only a hole up to EOF.
      if (errno == EINVAL) return absl::UnimplementedError("no SEEK_DATA");
      return ErrnoError(errno, absl::StrCat("lseek(SEEK_DATA) ", file.path()));
    }
    off_t hole = lseek(file.fd(), data, SEEK_HOLE);
    if (hole < 0) {
      return ErrnoError(errno, absl::StrCat("lseek(SEEK_HOLE) ", file.path()));
    }
    hole = std::min(hole, size);
    written += static_cast<uint64_t>(hole - data);
    pos = hole;
  }
  return written;
}

// The slots of several files as one offset space.
struct SlotSpace {
  std::vector<File> files;
  std::vector<uint64_t> first_slot;  // Per file; plus the total at the end.

  // File index and byte offset of slot `s`.
  std::pair<size_t, uint64_t> Locate(uint64_t s, uint64_t read_size) const {
    const size_t f = static_cast<size_t>(
        std::upper_bound(first_slot.begin(), first_slot.end(), s) -
        first_slot.begin() - 1);
    return {f, (s - first_slot[f]) * read_size};
  }
};

constexpr uint64_t kHugePage = uint64_t{2} << 20;

// The probe's read buffers: anonymous memory, pre-faulted, 4 KiB-aligned,
// optionally 2 MiB-aligned and advised to use transparent huge pages. The
// page size matters on virtio disks: a request holds at most max_segments
// physically contiguous runs (often 254), so a 1.25 MB read into scattered
// 4 KiB pages (306 of them) becomes two requests, and one into 2 MiB pages
// one (what that does to throughput: bench/measurements.md).
class ProbeBuffer {
 public:
  ProbeBuffer(ProbeBuffer&& other) noexcept
      : map_(std::exchange(other.map_, nullptr)),
        map_bytes_(std::exchange(other.map_bytes_, 0)),
        data_(std::exchange(other.data_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  ProbeBuffer(const ProbeBuffer&) = delete;
  ProbeBuffer& operator=(const ProbeBuffer&) = delete;
  ProbeBuffer& operator=(ProbeBuffer&&) = delete;
  ~ProbeBuffer() {
    if (map_ != nullptr) munmap(map_, map_bytes_);
  }

  static absl::StatusOr<ProbeBuffer> Allocate(uint64_t bytes, bool huge) {
    // Huge pages back only whole aligned 2 MiB ranges: round up to one.
    const uint64_t size =
        huge ? (bytes + kHugePage - 1) / kHugePage * kHugePage : AlignUp(bytes);
    const uint64_t map_bytes = size + (huge ? kHugePage : 0);
    // 4 KiB pages are mapped exactly as AlignedBuffer maps the engine's
    // buffers (MAP_POPULATE, then touched), so they get the same kind of
    // physical layout; huge pages must be advised before they are faulted.
    void* p =
        mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | (huge ? 0 : MAP_POPULATE), -1, 0);
    if (p == MAP_FAILED) {
      return ErrnoError(errno, absl::StrCat("mmap of ", map_bytes, " bytes"));
    }
    ProbeBuffer b(static_cast<uint8_t*>(p), map_bytes);
    b.bytes_ = size;
    b.data_ = b.map_;
    if (huge) {
      const uintptr_t at = reinterpret_cast<uintptr_t>(b.map_);
      b.data_ += (kHugePage - at % kHugePage) % kHugePage;
      // Best effort: without THP the buffer keeps 4 KiB pages, and
      // HugePageFraction() says so.
      madvise(b.data_, b.bytes_, MADV_HUGEPAGE);
    }
    volatile uint8_t* v = b.data_;
    for (uint64_t off = 0; off < b.bytes_; off += kDirectIoAlignment) {
      v[off] = 0;
    }
    return b;
  }

  uint8_t* data() const { return data_; }

  // Fraction of the buffer's mapping backed by 2 MiB pages (AnonHugePages
  // of its /proc/self/smaps entry); 0 when unreadable.
  double HugePageFraction() const {
    std::ifstream smaps("/proc/self/smaps");
    const uintptr_t at = reinterpret_cast<uintptr_t>(data_);
    std::string line;
    bool mine = false;
    while (std::getline(smaps, line)) {
      uintptr_t lo = 0, hi = 0;
      if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 &&
          line.find(':') > line.find(' ')) {
        mine = lo <= at && at < hi;
        continue;
      }
      unsigned long long kb = 0;
      if (mine &&
          std::sscanf(line.c_str(), "AnonHugePages: %llu kB", &kb) == 1) {
        return std::min(1.0, kb * 1024.0 / static_cast<double>(bytes_));
      }
    }
    return 0;
  }

 private:
  ProbeBuffer(uint8_t* map, uint64_t map_bytes)
      : map_(map), map_bytes_(map_bytes) {}

  uint8_t* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  uint8_t* data_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace

namespace internal {

RandomPermutation::RandomPermutation(uint64_t n, uint64_t seed) : n_(n) {
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  for (int i = 0; i < 4; ++i) keys_[i] = SplitMix64(seed + i);
}

uint64_t RandomPermutation::Encrypt(uint64_t x) const {
  uint64_t l = x >> half_bits_;
  uint64_t r = x & half_mask_;
  for (uint64_t k : keys_) {
    const uint64_t f = SplitMix64(r ^ k) & half_mask_;
    const uint64_t t = l ^ f;
    l = r;
    r = t;
  }
  return (l << half_bits_) | r;
}

uint64_t RandomPermutation::operator()(uint64_t i) const {
  // The Feistel network permutes [0, 4^half_bits) < 4n; walking the cycle
  // until a value lands below n permutes [0, n).
  uint64_t x = Encrypt(i);
  while (x >= n_) x = Encrypt(x);
  return x;
}

}  // namespace internal

absl::StatusOr<uint64_t> WrittenBytes(const File& file) {
  struct stat st;
  if (fstat(file.fd(), &st) != 0) {
    return ErrnoError(errno, absl::StrCat("fstat ", file.path()));
  }
  if (S_ISBLK(st.st_mode)) return file.size();
  absl::StatusOr<uint64_t> n = WrittenBytesByFiemap(file);
  if (n.ok() || !absl::IsUnimplemented(n.status())) return n;
  n = WrittenBytesBySeek(file);
  if (n.ok() || !absl::IsUnimplemented(n.status())) return n;
  return std::min<uint64_t>(file.size(),
                            static_cast<uint64_t>(st.st_blocks) * 512);
}

absl::Status CheckWritten(const File& file) {
  FLOTILLA_ASSIGN_OR_RETURN(uint64_t written, WrittenBytes(file));
  if (static_cast<double>(written) < 0.99 * static_cast<double>(file.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        file.path(), " is sparse or preallocated: only ", FormatBytes(written),
        " of its ", FormatBytes(file.size()),
        " hold written data, and reads of holes or unwritten extents return "
        "zeros without touching the disk; measure on a file of real data"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DiskProbeResult> ProbeRandomReads(
    const std::vector<std::string>& paths, const DiskProbeOptions& o) {
  if (o.read_size == 0 || o.queue_depth < 1 || o.queue_depth > 1024 ||
      !(o.seconds > 0) || paths.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ProbeRandomReads: need files, read_size > 0, queue_depth in 1..1024,"
        " seconds > 0 (got ",
        paths.size(), " files, ", o.read_size, ", ", o.queue_depth, ", ",
        o.seconds, ")"));
  }
  const uint64_t rs = AlignUp(o.read_size);
  DiskProbeResult result;
  result.read_size = rs;
  result.queue_depth = o.queue_depth;
  result.direct = true;
  SlotSpace space;
  uint64_t slots = 0;
  for (const std::string& path : paths) {
    FLOTILLA_ASSIGN_OR_RETURN(File file, File::Open(path, /*direct=*/true));
    FLOTILLA_RETURN_IF_ERROR(CheckWritten(file));
    result.direct = result.direct && file.direct();
    space.first_slot.push_back(slots);
    slots += file.size() / rs;
    result.span_bytes += file.size() / rs * rs;
    space.files.push_back(std::move(file));
  }
  space.first_slot.push_back(slots);
  if (slots == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ProbeRandomReads: ", paths[0], paths.size() > 1 ? " and the rest" : "",
        " (", space.files[0].size(), " bytes) is smaller than one read of ", rs,
        " bytes"));
  }

  // Pre-faulted so first-touch page faults (~5.6 us/page here) do not count
  // as disk time. Declared before the reader, so that on an early return
  // the reader drains its reads before the buffer goes away.
  FLOTILLA_ASSIGN_OR_RETURN(
      ProbeBuffer buf,
      ProbeBuffer::Allocate(rs * static_cast<uint64_t>(o.queue_depth),
                            o.huge_pages));
  result.huge_page_fraction = buf.HugePageFraction();
  BatchReaderOptions options;
  options.queue_depth = o.queue_depth;
  // One syscall per read, like fio and the engine's expert reads; split only
  // reads larger than the per-read cap.
  options.chunk_bytes = std::min<uint64_t>(rs, 1ull << 30);
  FLOTILLA_ASSIGN_OR_RETURN(auto reader, CreateBatchReader(o.kind, options));
  result.reader = reader->name();

  uint64_t pass = 0;
  uint64_t next_in_pass = 0;
  auto perm = std::make_unique<internal::RandomPermutation>(slots, 0x5eedf10u);
  std::vector<Clock::time_point> started(o.queue_depth);
  std::vector<double> latencies_ms;      // In the window.
  std::vector<double> all_latencies_ms;  // Used when no window formed.
  uint64_t issued_bytes = 0;
  auto issue = [&](int slot) -> absl::Status {
    if (next_in_pass == slots) {  // A new pass: reshuffle.
      next_in_pass = 0;
      perm = std::make_unique<internal::RandomPermutation>(
          slots, 0x5eedf10u + (++pass) * 0x10001);
    }
    const auto [f, offset] = space.Locate((*perm)(next_in_pass++), rs);
    ReadRequest r{&space.files[f], offset, rs,
                  buf.data() + static_cast<uint64_t>(slot) * rs,
                  static_cast<uint64_t>(slot)};
    started[slot] = Clock::now();
    issued_bytes += rs;
    return reader->Submit({r});
  };
  auto bytes_allow = [&] {
    return o.max_bytes == 0 || issued_bytes + rs <= o.max_bytes;
  };

  // The window opens when the first wave (the reads submitted together at
  // start-up) has completed, and closes at the completion that makes it
  // both `seconds` long and min_reads reads large; nothing is submitted
  // after that. A hard cap bounds a disk too slow for min_reads.
  const uint64_t min_reads = 2 * static_cast<uint64_t>(o.queue_depth);
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point cap =
      t0 + std::chrono::duration_cast<Clock::duration>(
               std::chrono::duration<double>(4 * o.seconds + 5));
  int in_flight = 0;
  for (int slot = 0; slot < o.queue_depth && (slot == 0 || bytes_allow());
       ++slot) {
    FLOTILLA_RETURN_IF_ERROR(issue(slot));
    ++in_flight;
  }
  const uint64_t first_wave = static_cast<uint64_t>(in_flight);
  uint64_t completed = 0;
  bool open = false;    // Window open.
  bool closed = false;  // Window closed (or never will open): stop issuing.
  Clock::time_point t_open = t0, t_close = t0, t_prev = t0, t_last = t0;
  double area = 0;  // Integral of in_flight over the window.
  while (in_flight > 0) {
    FLOTILLA_ASSIGN_OR_RETURN(ReadCompletion c, reader->WaitOne());
    FLOTILLA_RETURN_IF_ERROR(c.status);
    const Clock::time_point t = Clock::now();
    const int slot = static_cast<int>(c.tag);
    const bool in_window = open && !closed;
    const double latency_ms =
        std::chrono::duration<double, std::milli>(t - started[slot]).count();
    all_latencies_ms.push_back(latency_ms);
    if (in_window) {
      area += in_flight * Seconds(t - t_prev);
      result.bytes += rs;
      ++result.reads;
      latencies_ms.push_back(latency_ms);
    }
    t_prev = t_last = t;
    --in_flight;
    ++completed;
    result.total_bytes += rs;
    if (!open && completed == first_wave) {
      open = true;
      t_open = t;
    }
    if (in_window && result.reads >= min_reads &&
        Seconds(t - t_open) >= o.seconds) {
      closed = true;
      t_close = t;
    }
    if (!closed && (t >= cap || !bytes_allow())) {
      closed = true;
      t_close = t;
    }
    if (!closed) {
      FLOTILLA_RETURN_IF_ERROR(issue(slot));
      ++in_flight;
    }
  }
  result.steady = result.reads > 0;
  if (result.steady) {
    result.seconds = Seconds(t_close - t_open);
    result.mean_queue_depth = result.seconds > 0 ? area / result.seconds : 0;
  } else {
    // Stopped by max_bytes before a window formed: the whole run.
    result.bytes = result.total_bytes;
    result.reads = completed;
    result.seconds = Seconds(t_last - t0);
    result.mean_queue_depth = static_cast<double>(first_wave);
    latencies_ms = std::move(all_latencies_ms);
  }
  result.gb_per_s =
      result.seconds > 0 ? result.bytes / result.seconds / 1e9 : 0;
  result.p50_ms = Percentile(latencies_ms, 0.50);
  result.p99_ms = Percentile(latencies_ms, 0.99);
  return result;
}

absl::StatusOr<DiskProbeResult> ProbeRandomReads(
    const std::string& path, uint64_t read_size, int queue_depth,
    double seconds, uint64_t max_bytes, ReaderKind kind) {
  DiskProbeOptions o;
  o.read_size = read_size;
  o.queue_depth = queue_depth;
  o.seconds = seconds;
  o.max_bytes = max_bytes;
  o.kind = kind;
  return ProbeRandomReads(std::vector<std::string>{path}, o);
}

std::string FormatProbeResult(const DiskProbeResult& r) {
  return absl::StrFormat(
      "%s x QD%d: %.2f GB/s (p50 %.1f ms, p99 %.1f ms, mean QD %.1f, %s in "
      "%.2f s%s, %s, %s pages, %s)",
      FormatBytes(r.read_size), r.queue_depth, r.gb_per_s, r.p50_ms, r.p99_ms,
      r.mean_queue_depth, FormatBytes(r.bytes), r.seconds,
      r.steady ? "" : " incl. start-up", r.reader,
      r.huge_page_fraction >= 0.5 ? "2 MiB" : "4 KiB",
      r.direct ? "O_DIRECT" : "buffered (O_DIRECT refused)");
}

}  // namespace flotilla::io
