// File plumbing shared by `pack` and its verifier: large aligned writes into
// pack files, durable small-file replacement, and reading many expert runs
// with few large O_DIRECT reads.
#ifndef FLOTILLA_TOOLS_PACK_IO_H_
#define FLOTILLA_TOOLS_PACK_IO_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/file.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::tools {

// Pack output file (trunk.bin, experts.bin), written with large pwrites.
// O_DIRECT when the filesystem allows it, so writing 100+ GB does not evict
// the page cache (and stall on writeback); buffered otherwise (tmpfs).
// Thread-safe: Write/Sync may be called from several threads at once for
// disjoint ranges.
class OutFile {
 public:
  OutFile() = default;
  ~OutFile();
  OutFile(OutFile&& other) noexcept;
  OutFile& operator=(OutFile&& other) noexcept;
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;

  // Opens (creating) `path` and sets its size to `size`. With `truncate`,
  // drops old contents first (holes read as zeros), so a fresh pack over a
  // stale file ends byte-identical to one into an empty directory.
  static absl::StatusOr<OutFile> Open(const std::string& path, uint64_t size,
                                      bool truncate);

  // Writes `length` bytes at `offset`. For O_DIRECT, data, offset and
  // length must be 4 KiB-aligned (callers write whole regions / runs padded
  // to 4 KiB).
  absl::Status Write(const uint8_t* data, uint64_t length,
                     uint64_t offset) const;
  // fdatasync: what was written survives a crash before the pack records it.
  absl::Status Sync() const;

  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }

 private:
  int fd_ = -1;
  bool direct_ = false;
  std::string path_;
};

// Replaces `path` with `data` so that a crash leaves the old or the new
// file, never a torn one: write a temp file, fsync, rename, fsync the dir.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data);
// A pack's manifest: expert_table.bin, then manifest.json (whose recorded
// table checksum ties the two), each written atomically.
absl::Status WritePackManifest(const std::string& dir,
                               const pack::PackManifest& manifest);
// Whether `path` exists (false on any error).
bool PathExists(const std::string& path);
// Removes `path` if it exists.
absl::Status RemoveFile(const std::string& path);

// fsync of a directory (after renames and removals in it).
absl::Status SyncDir(const std::string& dir);

// A byte run in one of several files.
struct FileRun {
  int file = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Runs [begin, end) of a run list, read together with one large read.
struct RunBatch {
  size_t begin = 0, end = 0;
  int file = 0;
  uint64_t span_offset = 0;  // first byte of the first run
  uint64_t span_length = 0;  // through the last byte of the last run
};

// Groups consecutive runs of the same file into batches of at most
// `max_bytes` (a longer run is a batch of its own), breaking where runs go
// backwards or leave a gap over `max_gap` bytes (reading it would be waste).
std::vector<RunBatch> MakeRunBatches(const std::vector<FileRun>& runs,
                                     uint64_t max_bytes, uint64_t max_gap);

// Buffer bytes ReadRunBatch needs for `batch`: its span widened to 4 KiB.
uint64_t BatchBufferBytes(const RunBatch& batch);

// Reads `batch` from `file` (opened O_DIRECT where possible) into `buffer`
// and returns a pointer to each run's first byte (runs[begin..end)).
absl::StatusOr<std::vector<const uint8_t*>> ReadRunBatch(
    const io::File& file, const std::vector<FileRun>& runs,
    const RunBatch& batch, io::AlignedBuffer* buffer);

// Reads `length` bytes at `offset` of `file` through `buffer` in 64 MiB
// pieces (regions are too large to hold twice) and calls
// visit(data, position_in_range, n) for each piece, in order.
absl::Status StreamFileRange(
    const io::File& file, uint64_t offset, uint64_t length,
    io::AlignedBuffer* buffer,
    const std::function<void(const uint8_t*, uint64_t, uint64_t)>& visit);

// Calls fn(i, worker) for every i in [0, n) on `threads` threads (worker in
// [0, threads)), handing out indices in increasing order; stops handing them
// out once `*stop` is true. Returns when every started call has returned.
void RunParallel(size_t n, int threads,
                 const std::function<void(size_t i, int worker)>& fn,
                 const std::atomic<bool>* stop);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_PACK_IO_H_
