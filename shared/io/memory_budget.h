// Memory budget: parsing "--mem 8G" style sizes and presets, a thread-safe
// accountant that every large allocation is charged to, and RSS probes.
//
// Units: sizes in specs are binary (K/M/G/T = 1024^n). FormatBytes prints
// decimal units (1 GB = 10^9 bytes) because that is what disk and bandwidth
// figures use; MemoryAccountant::Report() prints MiB (2^20) for memory.
#ifndef FLOTILLA_SHARED_IO_MEMORY_BUDGET_H_
#define FLOTILLA_SHARED_IO_MEMORY_BUDGET_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::io {

// Parses "8G", "512M", "1.5g", "123456", "64KiB", "2TB": an unsigned decimal
// number (fraction allowed with a unit) and an optional case-insensitive
// unit K/M/G/T (powers of 1024) with optional "B" or "iB"; a bare "B" means
// bytes. Surrounding whitespace is ignored. Errors (InvalidArgument) quote
// the text; overflow past 2^64 is OutOfRange.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// Resolves a --mem spec: a preset (laptop=8G, desktop=32G, workstation=96G,
// server=128G, max = MemTotal, auto = MemAvailable minus a 10% safety
// margin, both from /proc/meminfo) or a size accepted by ParseByteSize.
// Inside a memory cgroup with a limit (how benches emulate small machines),
// max is capped at the limit and auto at limit - usage, before the margin.
absl::StatusOr<uint64_t> ResolveBudget(absl::string_view spec);

// Reads one "Key:   N kB" field of /proc/meminfo, in bytes.
absl::StatusOr<uint64_t> ReadMeminfoBytes(absl::string_view key);

// Thread-safe ledger of large allocations against a fixed budget. It does
// not allocate anything itself: callers Charge() before allocating and
// Release() after freeing, so the plan printed at start and the metrics
// agree with what was actually reserved.
class MemoryAccountant {
 public:
  explicit MemoryAccountant(uint64_t budget_bytes) : budget_(budget_bytes) {}
  MemoryAccountant(const MemoryAccountant&) = delete;
  MemoryAccountant& operator=(const MemoryAccountant&) = delete;

  // Adds `bytes` to `owner` (e.g. "trunk.ring", "experts.buffers"). Returns
  // ResourceExhausted, naming owner, requested bytes, used and budget, and
  // charges nothing, when used() + bytes would exceed budget().
  absl::Status Charge(const std::string& owner, uint64_t bytes);

  // Returns `bytes` charged by `owner`. Releasing more than the owner holds
  // is a programmer error (CHECK).
  void Release(const std::string& owner, uint64_t bytes);

  uint64_t budget() const { return budget_; }
  uint64_t used() const;
  uint64_t peak() const;
  uint64_t available() const;
  // Bytes currently charged to `owner` (0 if unknown).
  uint64_t owner_bytes(const std::string& owner) const;
  // Snapshot of all owners with a non-zero charge, sorted by name.
  std::map<std::string, uint64_t> owners() const;

  // Human table: one row per owner with MiB and share of budget, then
  // used/peak/budget lines.
  std::string Report() const;

 private:
  const uint64_t budget_;
  // std::mutex, not absl::Mutex, so that ThreadSanitizer sees the lock
  // (Debian's libabsl is not built with it).
  mutable std::mutex mu_;
  // Guarded by mu_.
  uint64_t used_ = 0;
  uint64_t peak_ = 0;
  std::map<std::string, uint64_t> by_owner_;
};

// Peak resident set size of this process (VmHWM in /proc/self/status), in
// bytes; 0 if unreadable.
uint64_t PeakRssBytes();
// Current resident set size (VmRSS), in bytes; 0 if unreadable.
uint64_t CurrentRssBytes();
// Hands the heap's free pages back to the kernel (glibc malloc_trim), then
// returns CurrentRssBytes(): what the process really holds. Opening a
// checkpoint parses hundreds of MB of metadata that is freed before the
// plan is made, but the allocator would keep those pages resident and the
// plan would charge them as the process baseline.
uint64_t TrimmedRssBytes();

// Decimal units with two decimals: "812 B", "1.27 GB", "3.40 MB", "12.00 kB".
std::string FormatBytes(uint64_t bytes);
// Binary units with two decimals: "1.18 GiB", "512.00 MiB".
std::string FormatBytesBinary(uint64_t bytes);

}  // namespace flotilla::io

#endif  // FLOTILLA_SHARED_IO_MEMORY_BUDGET_H_
