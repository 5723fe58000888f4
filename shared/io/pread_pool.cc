// BatchReader on a pool of threads doing blocking pread. Used where io_uring
// is unavailable (seccomp, old kernels) and as a reference implementation:
// for multi-MB reads parallel preads keep up with io_uring
// (bench/measurements.md), so this is a real option, not only a fallback.
#include <algorithm>
#include <deque>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "shared/base/status_macros.h"
#include "shared/io/batch_reader_internal.h"

namespace flotilla::io::internal {
namespace {

class PreadPool final : public BatchReader {
 public:
  PreadPool(const BatchReaderOptions& options)
      : chunk_bytes_(options.chunk_bytes) {
    const int n = std::min(options.queue_depth, kMaxPreadThreads);
    threads_.reserve(n);
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { WorkLoop(); });
  }

  ~PreadPool() override {
    {
      absl::MutexLock lock(&mu_);
      // Pieces not yet started are dropped; pieces being read finish first
      // (the join), so no thread writes into caller memory after we return.
      pending_.clear();
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

  absl::Status Submit(const std::vector<ReadRequest>& requests) override {
    FLOTILLA_RETURN_IF_ERROR(ValidateRequests(requests));
    absl::MutexLock lock(&mu_);
    tracker_.Add(requests, chunk_bytes_, &pending_);
    return absl::OkStatus();
  }

  absl::StatusOr<ReadCompletion> WaitOne() override {
    absl::MutexLock lock(&mu_);
    if (tracker_.in_flight() == 0) {
      return absl::FailedPreconditionError(
          "BatchReader::WaitOne with no reads in flight");
    }
    mu_.Await(absl::Condition(&RequestTracker::HasCompletion, &tracker_));
    return tracker_.PopCompletion();
  }

  size_t in_flight() const override {
    absl::MutexLock lock(&mu_);
    return tracker_.in_flight();
  }
  const char* name() const override { return "pread-pool"; }

 private:
  bool HasWorkOrStop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || !pending_.empty();
  }

  void WorkLoop() {
    while (true) {
      Piece piece;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &PreadPool::HasWorkOrStop));
        if (stop_) return;
        piece = pending_.front();
        pending_.pop_front();
      }
      // File::ReadAt loops over EINTR and short reads and zero-fills the
      // part of the last block past EOF, which is exactly a piece's contract.
      absl::Status s =
          piece.file->ReadAt(piece.offset, piece.remaining, piece.dst);
      absl::MutexLock lock(&mu_);
      tracker_.FinishPiece(piece, std::move(s));
    }
  }

  const uint64_t chunk_bytes_;
  mutable absl::Mutex mu_;
  std::deque<Piece> pending_ ABSL_GUARDED_BY(mu_);
  RequestTracker tracker_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BatchReader>> CreatePreadPool(
    const BatchReaderOptions& options) {
  return std::unique_ptr<BatchReader>(new PreadPool(options));
}

}  // namespace flotilla::io::internal
