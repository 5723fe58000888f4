#include "shared/io/batch_reader.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/batch_reader_internal.h"

namespace flotilla::io {
namespace internal {

absl::Status ValidateRequests(const std::vector<ReadRequest>& requests) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const ReadRequest& r = requests[i];
    if (r.file == nullptr || !r.file->is_open()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "read request ", i, " (tag ", r.tag, ") has no open file"));
    }
    absl::Status s = r.file->CheckRead(r.offset, r.length, r.dst);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("read request ", i, " (tag ",
                                                 r.tag, "): ", s.message()));
    }
  }
  return absl::OkStatus();
}

void SplitRequest(const ReadRequest& request, uint64_t request_id,
                  uint64_t chunk_bytes, std::vector<Piece>* out) {
  uint64_t done = 0;
  while (done < request.length) {
    const uint64_t n = std::min(chunk_bytes, request.length - done);
    out->push_back(Piece{request_id, request.file, request.offset + done, n,
                         request.dst + done});
    done += n;
  }
}

void RequestTracker::Add(const std::vector<ReadRequest>& requests,
                         uint64_t chunk_bytes, std::deque<Piece>* pending) {
  for (const ReadRequest& r : requests) {
    const uint64_t id = next_id_++;
    scratch_.clear();
    SplitRequest(r, id, chunk_bytes, &scratch_);
    ++in_flight_;
    if (scratch_.empty()) {
      completed_.push_back(ReadCompletion{r.tag, absl::OkStatus()});
      continue;
    }
    requests_[id] = RequestState{r.tag, scratch_.size(), absl::OkStatus()};
    pending->insert(pending->end(), scratch_.begin(), scratch_.end());
  }
}

void RequestTracker::FinishPiece(const Piece& piece, absl::Status status) {
  auto it = requests_.find(piece.request_id);
  RequestState& st = it->second;
  if (!status.ok() && st.status.ok()) st.status = std::move(status);
  if (--st.pieces_left == 0) {
    completed_.push_back(ReadCompletion{st.tag, std::move(st.status)});
    requests_.erase(it);
  }
}

ReadCompletion RequestTracker::PopCompletion() {
  ReadCompletion c = std::move(completed_.front());
  completed_.pop_front();
  --in_flight_;
  return c;
}

absl::Status ShortReadError(const Piece& piece) {
  return absl::DataLossError(absl::StrCat(
      "unexpected EOF reading ", piece.file->path(), " at offset ",
      piece.offset, " (", piece.remaining, " bytes left) but size is ",
      piece.file->size(), " (file truncated while open?)"));
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<BatchReader>> CreateBatchReader(
    ReaderKind kind, const BatchReaderOptions& options) {
  if (options.queue_depth < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue_depth must be >= 1, got ", options.queue_depth));
  }
  if (options.chunk_bytes == 0 || !IsAligned(options.chunk_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_bytes must be a positive multiple of 4096, got ",
                     options.chunk_bytes));
  }
  if (options.chunk_bytes > (1ull << 30)) {
    // One read syscall returns at most ~2 GiB; stay well under it.
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk_bytes ", options.chunk_bytes, " exceeds 1 GiB per read"));
  }
  switch (kind) {
    case ReaderKind::kPread:
      return internal::CreatePreadPool(options);
    case ReaderKind::kUring:
      return internal::CreateUringReader(options);
    case ReaderKind::kAuto: {
      auto uring = internal::CreateUringReader(options);
      // Any io_uring set-up failure (seccomp EPERM, ENOSYS on old kernels,
      // ENOMEM from locked-memory limits) means "use threads instead".
      if (uring.ok()) return uring;
      return internal::CreatePreadPool(options);
    }
  }
  return absl::InvalidArgumentError("unknown ReaderKind");
}

absl::StatusOr<std::unique_ptr<BatchReader>> CreateBatchReader(
    ReaderKind kind, int queue_depth) {
  BatchReaderOptions options;
  options.queue_depth = queue_depth;
  return CreateBatchReader(kind, options);
}

absl::StatusOr<std::unique_ptr<BatchReader>> MakeBatchReader(
    const ReaderFactory& factory, ReaderKind kind,
    const BatchReaderOptions& options) {
  if (factory) return factory(kind, options);
  return CreateBatchReader(kind, options);
}

absl::StatusOr<ReaderKind> ParseReaderKind(const std::string& text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "auto") return ReaderKind::kAuto;
  if (t == "uring" || t == "io_uring") return ReaderKind::kUring;
  if (t == "pread") return ReaderKind::kPread;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown reader \"", text, "\" (expected auto, io_uring or pread)"));
}

}  // namespace flotilla::io
