// BatchReader on io_uring (liburing). One ring per reader; the owning thread
// both fills the submission queue and reaps completions, so no locks. Up to
// queue_depth pieces are in the kernel at once; the rest wait in `pending_`
// and are submitted as slots free up inside WaitOne().
#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/batch_reader_internal.h"

namespace flotilla::io::internal {
namespace {

absl::Status UringError(int neg_errno, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(-neg_errno),
                      absl::StrCat(what, ": ", std::strerror(-neg_errno)));
}

// Submits one NOP and waits for it: seccomp profiles can allow
// io_uring_setup yet refuse io_uring_enter, and kAuto must notice that at
// creation time rather than on the first real read.
absl::Status CheckRingWorks(io_uring* ring) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (sqe == nullptr) return absl::InternalError("io_uring: no SQE for NOP");
  io_uring_prep_nop(sqe);
  int ret = io_uring_submit(ring);
  if (ret < 0) return UringError(ret, "io_uring_submit(NOP)");
  io_uring_cqe* cqe = nullptr;
  do {
    ret = io_uring_wait_cqe(ring, &cqe);
  } while (ret == -EINTR);
  if (ret < 0) return UringError(ret, "io_uring_wait_cqe(NOP)");
  const int res = cqe->res;
  io_uring_cqe_seen(ring, cqe);
  if (res < 0) return UringError(res, "io_uring NOP");
  return absl::OkStatus();
}

class UringReader final : public BatchReader {
 public:
  explicit UringReader(const BatchReaderOptions& options)
      : chunk_bytes_(options.chunk_bytes),
        slots_(static_cast<size_t>(options.queue_depth)) {
    free_slots_.reserve(slots_.size());
    for (size_t i = slots_.size(); i > 0; --i) free_slots_.push_back(i - 1);
  }

  // Sets up the ring in place (struct io_uring is not documented as
  // copyable, so it never moves). On failure the reader must be discarded.
  absl::Status Init();

  ~UringReader() override {
    if (!ring_ok_) return;
    // The kernel may still be writing into caller buffers: drain everything
    // already submitted before tearing the ring down.
    pending_.clear();
    while (in_kernel_ > 0) {
      io_uring_cqe* cqe = nullptr;
      const int ret = io_uring_wait_cqe(&ring_, &cqe);
      if (ret == -EINTR) continue;
      if (ret < 0) break;  // Ring is broken; nothing more will complete.
      io_uring_cqe_seen(&ring_, cqe);
      --in_kernel_;
    }
    io_uring_queue_exit(&ring_);
  }

  absl::Status Submit(const std::vector<ReadRequest>& requests) override {
    FLOTILLA_RETURN_IF_ERROR(ValidateRequests(requests));
    tracker_.Add(requests, chunk_bytes_, &pending_);
    return FillAndSubmit();
  }

  absl::StatusOr<ReadCompletion> WaitOne() override {
    if (tracker_.in_flight() == 0) {
      return absl::FailedPreconditionError(
          "BatchReader::WaitOne with no reads in flight");
    }
    while (!tracker_.has_completion()) {
      // Never wait on a ring the kernel holds nothing for: that would hang.
      // (FillAndSubmit leaves pending work only when all slots are busy, so
      // this fires only after a failed io_uring_submit.)
      if (in_kernel_ == 0) {
        return absl::InternalError(
            "io_uring reader has reads pending but none submitted");
      }
      io_uring_cqe* cqe = nullptr;
      const int ret = io_uring_wait_cqe(&ring_, &cqe);
      if (ret == -EINTR) continue;
      if (ret < 0) return UringError(ret, "io_uring_wait_cqe");
      FLOTILLA_RETURN_IF_ERROR(ReapReady());
    }
    return tracker_.PopCompletion();
  }

  absl::StatusOr<std::optional<ReadCompletion>> PollOne() override {
    if (!tracker_.has_completion() && tracker_.in_flight() > 0) {
      // As in WaitOne: pending work the kernel holds none of never lands.
      if (in_kernel_ == 0) {
        return absl::InternalError(
            "io_uring reader has reads pending but none submitted");
      }
      FLOTILLA_RETURN_IF_ERROR(ReapReady());
    }
    if (!tracker_.has_completion()) return std::nullopt;
    return std::optional<ReadCompletion>(tracker_.PopCompletion());
  }

  size_t in_flight() const override { return tracker_.in_flight(); }
  const char* name() const override { return "io_uring"; }

 private:
  // Reaps every CQE that is ready (none is fine), then refills the queue.
  absl::Status ReapReady() {
    io_uring_cqe* cqe = nullptr;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      HandleCompletion(static_cast<size_t>(io_uring_cqe_get_data64(cqe)),
                       cqe->res);
      ++seen;
    }
    io_uring_cq_advance(&ring_, seen);
    in_kernel_ -= seen;
    return FillAndSubmit();
  }

  // `res` is the read's return: bytes read or -errno.
  void HandleCompletion(size_t slot, int res) {
    Piece piece = slots_[slot];
    free_slots_.push_back(slot);
    if (res == -EINTR || res == -EAGAIN) {
      pending_.push_front(piece);  // Transient: retry as is.
      return;
    }
    if (res < 0) {
      tracker_.FinishPiece(
          piece,
          UringError(res, absl::StrCat("io_uring read of ", piece.file->path(),
                                       " at offset ", piece.offset, " length ",
                                       piece.remaining)));
      return;
    }
    const uint64_t n = static_cast<uint64_t>(res);
    piece.offset += n;
    piece.dst += n;
    piece.remaining -= n;
    if (piece.remaining == 0) {
      tracker_.FinishPiece(piece, absl::OkStatus());
      return;
    }
    if (piece.offset >= piece.file->size()) {
      // Past EOF inside the last block (Submit bounded requests to
      // File::ReadableEnd()): zero-fill, as File::ReadAt does.
      std::memset(piece.dst, 0, piece.remaining);
      tracker_.FinishPiece(piece, absl::OkStatus());
      return;
    }
    if (n == 0) {
      tracker_.FinishPiece(piece, ShortReadError(piece));
      return;
    }
    // Short read before EOF (allowed by POSIX, rare): read the remainder.
    pending_.push_front(piece);
  }

  absl::Status FillAndSubmit() {
    while (!pending_.empty() && !free_slots_.empty()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;  // SQ full: submit what we have first.
      const size_t slot = free_slots_.back();
      free_slots_.pop_back();
      slots_[slot] = pending_.front();
      pending_.pop_front();
      const Piece& p = slots_[slot];
      // Pieces are <= chunk_bytes, which CreateBatchReader keeps far below
      // the 2 GiB a single read can return, so the unsigned length is safe.
      io_uring_prep_read(sqe, p.file->fd(), p.dst,
                         static_cast<unsigned>(p.remaining), p.offset);
      io_uring_sqe_set_data64(sqe, slot);
    }
    // Flush everything in the SQ, including SQEs an earlier call could not
    // submit.
    while (io_uring_sq_ready(&ring_) > 0) {
      const int ret = io_uring_submit(&ring_);
      if (ret == -EINTR) continue;
      if ((ret == -EAGAIN || ret == -EBUSY) && in_kernel_ > 0) {
        break;  // Kernel is short of resources: retry after reaping.
      }
      if (ret == -EAGAIN || ret == -EBUSY) continue;
      if (ret < 0) return UringError(ret, "io_uring_submit");
      if (ret == 0) break;
      in_kernel_ += static_cast<size_t>(ret);
    }
    return absl::OkStatus();
  }

  const uint64_t chunk_bytes_;
  io_uring ring_;
  bool ring_ok_ = false;            // ring_ initialised (and must be exited).
  std::vector<Piece> slots_;        // Pieces in the kernel, by user_data.
  std::vector<size_t> free_slots_;  // Indices of unused slots_.
  std::deque<Piece> pending_;       // Pieces waiting for a slot.
  RequestTracker tracker_;          // Requests submitted, not yet returned.
  size_t in_kernel_ = 0;  // SQEs the kernel accepted and we have not reaped.
};

absl::Status UringReader::Init() {
  const int ret =
      io_uring_queue_init(static_cast<unsigned>(slots_.size()), &ring_, 0);
  if (ret < 0) {
    return absl::UnavailableError(absl::StrCat(
        "io_uring unavailable (io_uring_queue_init: ", std::strerror(-ret),
        "); use the pread reader"));
  }
  ring_ok_ = true;
  absl::Status s = CheckRingWorks(&ring_);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "io_uring unavailable (", s.message(), "); use the pread reader"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BatchReader>> CreateUringReader(
    const BatchReaderOptions& options) {
  if (options.queue_depth > kMaxUringQueueDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("io_uring queue_depth ", options.queue_depth, " exceeds ",
                     kMaxUringQueueDepth));
  }
  auto reader = std::make_unique<UringReader>(options);
  FLOTILLA_RETURN_IF_ERROR(reader->Init());
  return std::unique_ptr<BatchReader>(std::move(reader));
}

}  // namespace flotilla::io::internal
