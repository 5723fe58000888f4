// BatchReader on a pool of threads doing blocking pread. Used where io_uring
// is unavailable (seccomp, old kernels) and as a reference implementation:
// for multi-MB reads parallel preads keep up with io_uring
// (bench/measurements.md), so this is a real option, not only a fallback.
//
// std::mutex rather than absl::Mutex: ThreadSanitizer sees pthread locks,
// but not Debian's uninstrumented libabsl, whose Mutex waits on its own
// futexes; with absl::Mutex every hand-off here read as a race.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

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
      std::lock_guard<std::mutex> lock(mu_);
      // Pieces not yet started are dropped; pieces being read finish first
      // (the join), so no thread writes into caller memory after we return.
      pending_.clear();
      stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  absl::Status Submit(const std::vector<ReadRequest>& requests) override {
    FLOTILLA_RETURN_IF_ERROR(ValidateRequests(requests));
    {
      std::lock_guard<std::mutex> lock(mu_);
      tracker_.Add(requests, chunk_bytes_, &pending_);
    }
    work_cv_.notify_all();
    done_cv_.notify_all();  // an empty request completes at once
    return absl::OkStatus();
  }

  absl::StatusOr<ReadCompletion> WaitOne() override {
    std::unique_lock<std::mutex> lock(mu_);
    if (tracker_.in_flight() == 0) {
      return absl::FailedPreconditionError(
          "BatchReader::WaitOne with no reads in flight");
    }
    done_cv_.wait(lock, [this] { return tracker_.has_completion(); });
    return tracker_.PopCompletion();
  }

  absl::StatusOr<std::optional<ReadCompletion>> PollOne() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!tracker_.has_completion()) return std::nullopt;
    return std::optional<ReadCompletion>(tracker_.PopCompletion());
  }

  size_t in_flight() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return tracker_.in_flight();
  }
  const char* name() const override { return "pread-pool"; }

 private:
  void WorkLoop() {
    while (true) {
      Piece piece;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [this] { return stop_ || !pending_.empty(); });
        if (stop_) return;
        piece = pending_.front();
        pending_.pop_front();
      }
      // File::ReadAt loops over EINTR and short reads and zero-fills the
      // part of the last block past EOF, which is exactly a piece's contract.
      absl::Status s =
          piece.file->ReadAt(piece.offset, piece.remaining, piece.dst);
      {
        std::lock_guard<std::mutex> lock(mu_);
        tracker_.FinishPiece(piece, std::move(s));
      }
      // Every waiter rechecks; a finished piece may complete a request.
      done_cv_.notify_all();
    }
  }

  const uint64_t chunk_bytes_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // pending_ grew, or stop_
  std::condition_variable done_cv_;  // a piece finished
  // Guarded by mu_.
  std::deque<Piece> pending_;
  RequestTracker tracker_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BatchReader>> CreatePreadPool(
    const BatchReaderOptions& options) {
  return std::unique_ptr<BatchReader>(new PreadPool(options));
}

}  // namespace flotilla::io::internal
