// Pieces shared by the io_uring and pread-pool BatchReaders. Not part of the
// public API.
#ifndef FLOTILLA_SHARED_IO_BATCH_READER_INTERNAL_H_
#define FLOTILLA_SHARED_IO_BATCH_READER_INTERNAL_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/io/batch_reader.h"

namespace flotilla::io::internal {

inline constexpr int kMaxUringQueueDepth = 1024;
inline constexpr int kMaxPreadThreads = 64;

// A contiguous slice of one request, read by one syscall (plus retries for
// short reads).
struct Piece {
  uint64_t request_id = 0;  // Index of the owning request's state.
  const File* file = nullptr;
  uint64_t offset = 0;     // Next file offset to read.
  uint64_t remaining = 0;  // Bytes still to read.
  uint8_t* dst = nullptr;  // Where the next byte lands.
};

// Checks every request of a batch before any is queued.
absl::Status ValidateRequests(const std::vector<ReadRequest>& requests);

// Splits `request` (validated) into pieces of at most `chunk_bytes`.
void SplitRequest(const ReadRequest& request, uint64_t request_id,
                  uint64_t chunk_bytes, std::vector<Piece>* out);

// The request bookkeeping both readers share: requests split into pieces,
// a request completes (first error wins) when its last piece does, and
// completions queue in that order. Not thread-safe: the pread pool calls it
// under its mutex.
class RequestTracker {
 public:
  // Splits every request (validated) into pieces of at most `chunk_bytes`,
  // appended to `pending`; an empty request completes at once.
  void Add(const std::vector<ReadRequest>& requests, uint64_t chunk_bytes,
           std::deque<Piece>* pending);
  // Records one piece's result.
  void FinishPiece(const Piece& piece, absl::Status status);
  bool has_completion() const { return !completed_.empty(); }
  // Pops the oldest completion (has_completion() must hold).
  ReadCompletion PopCompletion();
  // Requests added and not yet popped.
  size_t in_flight() const { return in_flight_; }

 private:
  struct RequestState {
    uint64_t tag;
    size_t pieces_left;
    absl::Status status;  // First error among the pieces.
  };
  std::unordered_map<uint64_t, RequestState> requests_;
  std::deque<ReadCompletion> completed_;
  std::vector<Piece> scratch_;
  uint64_t next_id_ = 0;
  size_t in_flight_ = 0;
};

// Error for a read that hit EOF before File::size(), naming the piece.
absl::Status ShortReadError(const Piece& piece);

absl::StatusOr<std::unique_ptr<BatchReader>> CreateUringReader(
    const BatchReaderOptions& options);
absl::StatusOr<std::unique_ptr<BatchReader>> CreatePreadPool(
    const BatchReaderOptions& options);

}  // namespace flotilla::io::internal

#endif  // FLOTILLA_SHARED_IO_BATCH_READER_INTERNAL_H_
