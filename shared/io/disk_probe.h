// Measures the disk's random-read ceiling in the same run as whatever is
// being benchmarked (figures vary ±10-30% between runs and machines, so only
// same-run ratios are meaningful). Used by `flotilla-tool doctor` and bench
// scripts.
#ifndef FLOTILLA_SHARED_IO_DISK_PROBE_H_
#define FLOTILLA_SHARED_IO_DISK_PROBE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "shared/io/batch_reader.h"

namespace flotilla::io {

struct DiskProbeResult {
  uint64_t read_size = 0;  // Bytes per read (rounded up to 4 KiB).
  int queue_depth = 0;     // Reads kept in flight.
  uint64_t bytes = 0;      // Total bytes read.
  uint64_t reads = 0;      // Completed reads.
  double seconds = 0;      // Wall time of the measured phase.
  double gb_per_s = 0;     // bytes / seconds / 1e9 (decimal GB).
  double p50_ms = 0;       // Per-read latency, submit to completion.
  double p99_ms = 0;
  bool direct = false;  // False if the filesystem refused O_DIRECT
                        // (then the page cache inflates the result).
  std::string reader;   // BatchReader::name() used.
};

// Issues reads of `read_size` bytes at random 4 KiB-aligned offsets of `path`
// (O_DIRECT) with `queue_depth` in flight, until `seconds` elapse or
// `max_bytes` have been read (0 = no byte limit), whichever comes first.
// `path` must be at least read_size long. Uses ReaderKind::kAuto unless
// `kind` says otherwise. Reads land in one pre-faulted buffer per slot.
absl::StatusOr<DiskProbeResult> ProbeRandomReads(
    const std::string& path, uint64_t read_size, int queue_depth,
    double seconds, uint64_t max_bytes, ReaderKind kind = ReaderKind::kAuto);

// One-line summary: "1.25 MB x QD32: 2.17 GB/s (p50 18.1 ms, p99 31.0 ms,
// 3.2 GB in 1.5 s, io_uring, O_DIRECT)".
std::string FormatProbeResult(const DiskProbeResult& r);

}  // namespace flotilla::io

#endif  // FLOTILLA_SHARED_IO_DISK_PROBE_H_
