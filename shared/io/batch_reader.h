// Batched asynchronous positional reads: io_uring when the kernel and the
// container allow it, otherwise a pool of pread threads with the same
// semantics. The streaming engine issues all of a layer's expert reads in one
// Submit() and consumes them with WaitOne() in completion order.
//
// Thread-compatibility: a BatchReader is NOT thread-safe. One thread submits
// and waits; Submit() and WaitOne() must not be called concurrently. (The
// pread pool's worker threads are internal.) Destroying a reader with reads
// in flight waits for them to finish, so buffers must outlive the reader or
// be drained first.
#ifndef FLOTILLA_SHARED_IO_BATCH_READER_H_
#define FLOTILLA_SHARED_IO_BATCH_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/io/file.h"

namespace flotilla::io {

struct ReadRequest {
  const File* file = nullptr;  // Must outlive the request's completion.
  uint64_t offset = 0;         // 4 KiB-aligned when file->direct().
  uint64_t length = 0;         // 4 KiB-aligned when file->direct().
  uint8_t* dst = nullptr;      // 4 KiB-aligned when file->direct(); holds
                               // `length` bytes until completion.
  uint64_t tag = 0;            // Caller's id, echoed in the completion.
};

struct ReadCompletion {
  uint64_t tag = 0;
  // OK when all `length` bytes landed (bytes past EOF within the last 4 KiB
  // block are zero-filled, see File::ReadAt); otherwise the first error seen
  // for any piece of the request, naming file, offset and length.
  absl::Status status;
};

class BatchReader {
 public:
  virtual ~BatchReader() = default;

  // Queues `requests` and starts them. Each request is validated first (null
  // file/dst, alignment for direct files, range within File::ReadableEnd());
  // an invalid request makes Submit() return InvalidArgument/OutOfRange
  // without queuing any request of the batch. Requests larger than the chunk
  // size are split into pieces that are in flight together.
  virtual absl::Status Submit(const std::vector<ReadRequest>& requests) = 0;

  // Blocks until some submitted request has completed fully (all its
  // pieces) and returns it. Returns FailedPrecondition when nothing is in
  // flight (never hangs). An I/O error of a request is reported in
  // ReadCompletion::status; a non-OK StatusOr means the reader itself broke.
  virtual absl::StatusOr<ReadCompletion> WaitOne() = 0;

  // Like WaitOne, without blocking: a request that has already completed
  // fully, or nullopt when none has (also when nothing is in flight). Lets
  // a caller gather every read that landed while it was busy, to handle
  // them together.
  virtual absl::StatusOr<std::optional<ReadCompletion>> PollOne() = 0;

  // Requests submitted and not yet returned by WaitOne() or PollOne().
  virtual size_t in_flight() const = 0;

  // "io_uring" or "pread-pool", for logs and `flotilla-tool doctor`.
  virtual const char* name() const = 0;
};

enum class ReaderKind {
  kAuto,   // io_uring, falling back to kPread if io_uring cannot be set up.
  kUring,  // io_uring or an error (Unavailable) explaining why not.
  kPread,  // Pool of pread threads.
};

struct BatchReaderOptions {
  // Maximum pieces in flight at once: io_uring ring entries (1..1024) or
  // pread threads (min(queue_depth, 64): more threads than a disk's queue
  // only add scheduler churn). Must be >= 1.
  int queue_depth = 16;
  // Requests longer than this are split into pieces of this size (multiple
  // of 4 KiB). 8 MiB keeps a 72 MB trunk layer at ~9 pieces in flight.
  uint64_t chunk_bytes = 8ull << 20;
};

absl::StatusOr<std::unique_ptr<BatchReader>> CreateBatchReader(
    ReaderKind kind, const BatchReaderOptions& options);

// Where an engine gets its readers: CreateBatchReader in production; a test
// swaps in readers that inject faults (shared/testing/faulty_reader.h),
// the way LevelDB tests swap the Env. Must be thread-safe (the trunk's
// reader thread and the expert fetcher each make their own).
using ReaderFactory =
    std::function<absl::StatusOr<std::unique_ptr<BatchReader>>(
        ReaderKind, const BatchReaderOptions&)>;

// `factory`'s reader when it is set, else CreateBatchReader's.
absl::StatusOr<std::unique_ptr<BatchReader>> MakeBatchReader(
    const ReaderFactory& factory, ReaderKind kind,
    const BatchReaderOptions& options);

// Shorthand with the default chunk size.
absl::StatusOr<std::unique_ptr<BatchReader>> CreateBatchReader(ReaderKind kind,
                                                               int queue_depth);

// Parses "auto" / "uring" / "io_uring" / "pread" (for flags).
absl::StatusOr<ReaderKind> ParseReaderKind(const std::string& text);

}  // namespace flotilla::io

#endif  // FLOTILLA_SHARED_IO_BATCH_READER_H_
