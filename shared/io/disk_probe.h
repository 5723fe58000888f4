// Measures the disk's random-read bandwidth the way fio does
// (`fio --rw=randread --direct=1 --ioengine=io_uring --bs=B --iodepth=Q`),
// in the same run as whatever is being benchmarked (figures vary ±10-30%
// between runs and even second to second on a shared virtual disk, so only
// same-run ratios are meaningful). Used by `flotilla-tool doctor` and
// `flotilla-bench-disk`.
//
// What makes the figure trustworthy (each was a way to get a wrong one):
// - O_DIRECT, buffers 4 KiB-aligned and pre-faulted; direct() says when the
//   filesystem refused O_DIRECT (then the page cache inflates the figure).
// - The buffers' page size is chosen, not left to luck (huge_pages below):
//   it decides how many device requests one read becomes.
// - Files with holes or preallocated-but-unwritten extents are refused: such
//   reads return zeros without touching the disk.
// - Offsets are multiples of the read size, drawn without replacement (a
//   random permutation of the files' read-sized slots, reshuffled each pass,
//   like fio's random map), so no read overlaps another in a pass.
// - `queue_depth` reads stay in flight: each completion is replaced at once
//   (never "submit a batch, wait for all"); mean_queue_depth reports it.
// - Only the steady state is timed: the first wave of reads (start-up) and
//   the drain after the last submission are excluded, and the window lasts
//   at least `seconds` and 2 x queue_depth reads.
#ifndef FLOTILLA_SHARED_IO_DISK_PROBE_H_
#define FLOTILLA_SHARED_IO_DISK_PROBE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/io/batch_reader.h"
#include "shared/io/file.h"

namespace flotilla::io {

struct DiskProbeOptions {
  uint64_t read_size = 0;  // Bytes per read; rounded up to 4 KiB.
  int queue_depth = 1;     // Reads kept in flight (1..1024).
  double seconds = 3;      // Length of the timed steady-state window.
  uint64_t max_bytes = 0;  // Stop issuing after this many bytes (0 = none).
  ReaderKind kind = ReaderKind::kAuto;
  // Read into buffers of 2 MiB transparent huge pages instead of 4 KiB
  // pages. On a virtio disk (at most 254 physically contiguous segments per
  // request) this decides whether an expert read is one request or two
  // (bench/measurements.md). Off by default: the engine's buffers
  // (AlignedBuffer) use 4 KiB pages, and doctor predicts the engine.
  bool huge_pages = false;
};

struct DiskProbeResult {
  uint64_t read_size = 0;  // Bytes per read (rounded up to 4 KiB).
  int queue_depth = 0;     // Reads kept in flight.
  // The timed window: reads completed in it, their bytes and its length.
  uint64_t bytes = 0;
  uint64_t reads = 0;
  double seconds = 0;
  double gb_per_s = 0;  // bytes / seconds / 1e9 (decimal GB).
  // Time-weighted mean of reads in flight during the window (== queue_depth
  // when the probe keeps the queue full).
  double mean_queue_depth = 0;
  uint64_t total_bytes = 0;  // Everything read, start-up and drain included.
  uint64_t span_bytes = 0;   // Bytes of the files offsets were drawn from.
  // False when max_bytes stopped the run before a window formed; the figures
  // then cover the whole run, start-up included.
  bool steady = false;
  double p50_ms = 0;  // Per-read latency in the window, submit to completion.
  double p99_ms = 0;
  bool direct = false;  // False if the filesystem refused O_DIRECT
                        // (then the page cache inflates the result).
  std::string reader;   // BatchReader::name() used.
  // Fraction of the read buffers backed by 2 MiB pages (about 1 when
  // huge_pages was asked for and THP obliged, else usually 0).
  double huge_page_fraction = 0;
};

// Random reads of `options.read_size` over `paths` (one offset space: every
// read-sized slot of every file, files smaller than one read contribute
// none). Errors: InvalidArgument for bad options or when no file holds one
// read; FailedPrecondition when a file is sparse or unwritten (see
// CheckWritten).
absl::StatusOr<DiskProbeResult> ProbeRandomReads(
    const std::vector<std::string>& paths, const DiskProbeOptions& options);

// One file; `seconds` is the timed window, `max_bytes` 0 for no byte limit.
absl::StatusOr<DiskProbeResult> ProbeRandomReads(
    const std::string& path, uint64_t read_size, int queue_depth,
    double seconds, uint64_t max_bytes, ReaderKind kind = ReaderKind::kAuto);

// Bytes of `file` backed by written data on the disk: holes and extents
// that are allocated but unwritten (fallocate) are not counted, since reads
// of them return zeros without touching the disk. Uses FIEMAP (after
// syncing the file), else SEEK_DATA/SEEK_HOLE, else st_blocks. A block
// device counts as written throughout.
absl::StatusOr<uint64_t> WrittenBytes(const File& file);

// OK when at least 99% of `file` is written data; otherwise
// FailedPrecondition naming the file and how much of it is written.
absl::Status CheckWritten(const File& file);

// One-line summary: "1.25 MB x QD32: 2.17 GB/s (p50 18.1 ms, p99 31.0 ms,
// mean QD 32.0, 6.5 GB in 3.00 s, io_uring, 4 KiB pages, O_DIRECT)".
std::string FormatProbeResult(const DiskProbeResult& r);

namespace internal {

// A pseudo-random bijection of [0, n) (4-round Feistel network with cycle
// walking): the order in which the probe visits read-sized slots, so that a
// pass reads every slot once, with no memory per slot.
class RandomPermutation {
 public:
  RandomPermutation(uint64_t n, uint64_t seed);
  uint64_t operator()(uint64_t i) const;
  uint64_t size() const { return n_; }

 private:
  uint64_t Encrypt(uint64_t x) const;

  uint64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  uint64_t keys_[4];
};

}  // namespace internal
}  // namespace flotilla::io

#endif  // FLOTILLA_SHARED_IO_DISK_PROBE_H_
