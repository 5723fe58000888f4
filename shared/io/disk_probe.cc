#include "shared/io/disk_probe.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/base/status_macros.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/file.h"
#include "shared/io/memory_budget.h"

namespace flotilla::io {
namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * v.size()));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

}  // namespace

absl::StatusOr<DiskProbeResult> ProbeRandomReads(
    const std::string& path, uint64_t read_size, int queue_depth,
    double seconds, uint64_t max_bytes, ReaderKind kind) {
  if (read_size == 0 || queue_depth < 1 || seconds <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ProbeRandomReads: need read_size > 0, queue_depth >= 1, seconds > 0"
        " (got ",
        read_size, ", ", queue_depth, ", ", seconds, ")"));
  }
  FLOTILLA_ASSIGN_OR_RETURN(File file, File::Open(path, /*direct=*/true));
  const uint64_t rs = AlignUp(read_size);
  if (file.size() < rs) {
    return absl::InvalidArgumentError(
        absl::StrCat("ProbeRandomReads: ", path, " (", file.size(),
                     " bytes) is smaller than one read of ", rs, " bytes"));
  }
  BatchReaderOptions options;
  options.queue_depth = queue_depth;
  // One syscall per read, like the engine's expert reads; split only reads
  // larger than the per-read cap.
  options.chunk_bytes = std::min<uint64_t>(rs, 1ull << 30);
  FLOTILLA_ASSIGN_OR_RETURN(auto reader, CreateBatchReader(kind, options));
  // Pre-faulted so first-touch page faults (~5.6 us/page here) do not count
  // as disk time.
  FLOTILLA_ASSIGN_OR_RETURN(
      AlignedBuffer buf,
      AlignedBuffer::Allocate(rs * static_cast<uint64_t>(queue_depth),
                              /*prefault=*/true));

  std::mt19937_64 rng(0x5eedf10u);
  std::uniform_int_distribution<uint64_t> block(
      0, (file.size() - rs) / kDirectIoAlignment);
  std::vector<Clock::time_point> started(queue_depth);
  std::vector<double> latencies_ms;
  DiskProbeResult result;
  result.read_size = rs;
  result.queue_depth = queue_depth;
  result.direct = file.direct();
  result.reader = reader->name();

  const Clock::time_point t0 = Clock::now();
  const Clock::time_point deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(
               std::chrono::duration<double>(seconds));
  uint64_t issued_bytes = 0;
  auto issue = [&](int slot) -> absl::Status {
    ReadRequest r{&file, block(rng) * kDirectIoAlignment, rs,
                  buf.data() + static_cast<uint64_t>(slot) * rs,
                  static_cast<uint64_t>(slot)};
    started[slot] = Clock::now();
    issued_bytes += rs;
    return reader->Submit({r});
  };
  auto may_issue = [&] {
    return (max_bytes == 0 || issued_bytes + rs <= max_bytes) &&
           Clock::now() < deadline;
  };
  for (int slot = 0; slot < queue_depth && (slot == 0 || may_issue()); ++slot) {
    FLOTILLA_RETURN_IF_ERROR(issue(slot));
  }
  Clock::time_point last = t0;
  while (reader->in_flight() > 0) {
    FLOTILLA_ASSIGN_OR_RETURN(ReadCompletion c, reader->WaitOne());
    FLOTILLA_RETURN_IF_ERROR(c.status);
    last = Clock::now();
    const int slot = static_cast<int>(c.tag);
    latencies_ms.push_back(
        std::chrono::duration<double, std::milli>(last - started[slot])
            .count());
    result.bytes += rs;
    ++result.reads;
    if (may_issue()) FLOTILLA_RETURN_IF_ERROR(issue(slot));
  }
  result.seconds = std::chrono::duration<double>(last - t0).count();
  result.gb_per_s =
      result.seconds > 0 ? result.bytes / result.seconds / 1e9 : 0;
  result.p50_ms = Percentile(latencies_ms, 0.50);
  result.p99_ms = Percentile(latencies_ms, 0.99);
  return result;
}

std::string FormatProbeResult(const DiskProbeResult& r) {
  return absl::StrFormat(
      "%s x QD%d: %.2f GB/s (p50 %.1f ms, p99 %.1f ms, %s in %.2f s, %s, %s)",
      FormatBytes(r.read_size), r.queue_depth, r.gb_per_s, r.p50_ms, r.p99_ms,
      FormatBytes(r.bytes), r.seconds, r.reader,
      r.direct ? "O_DIRECT" : "buffered (O_DIRECT refused)");
}

}  // namespace flotilla::io
