#include "coordinator/stream/vocab_stream.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/checksum.h"
#include "shared/plan/memory_plan.h"

namespace flotilla::coordinator {
namespace {

uint64_t PassRows(uint64_t vocab, uint64_t row_bytes, uint64_t chunk_rows,
                  const VocabStreamOptions& o) {
  return plan::LmHeadPassRows(vocab, row_bytes, chunk_rows,
                              o.lm_head_pass_bytes);
}

uint64_t SpanBytes(uint64_t rows, uint64_t row_bytes) {
  return plan::RowSpanBytes(rows, row_bytes);
}

}  // namespace

uint64_t LmHeadStreamBufferBytes(uint64_t vocab, uint64_t row_bytes,
                                 uint64_t chunk_rows,
                                 const VocabStreamOptions& options) {
  return plan::LmHeadPassBufferBytes(vocab, row_bytes, chunk_rows,
                                     options.lm_head_pass_bytes);
}

absl::StatusOr<std::unique_ptr<VocabStream>> VocabStream::Create(
    const io::File* file, const pack::PackRegion* region, uint64_t field_offset,
    kernels::DenseType type, uint64_t vocab, uint64_t hidden, Use use,
    const VocabStreamOptions& options) {
  const uint64_t cr = region->chunk_rows;
  if (cr == 0 || region->chunk_checksums.size() != (vocab + cr - 1) / cr) {
    return absl::DataLossError(
        absl::StrCat("pack region ", region->kind,
                     " has no chunk checksums; re-run flotilla-tool pack"));
  }
  auto v = std::unique_ptr<VocabStream>(new VocabStream());
  v->file_ = file;
  v->region_ = region;
  v->field_offset_ = field_offset;
  v->type_ = type;
  v->vocab_ = vocab;
  v->hidden_ = hidden;
  v->row_bytes_ = v->hidden_ * (type == kernels::DenseType::kBF16 ? 2 : 4);
  v->options_ = options;
  if (use == Use::kEmbedRows) {
    FLOTILLA_ASSIGN_OR_RETURN(
        v->row_chunk_,
        io::AlignedBuffer::Allocate(SpanBytes(cr, v->row_bytes_), true));
    return v;
  }
  // At most two passes are submitted (the one needed now and the next),
  // split into 4 MiB pieces with four in the kernel at a time: like the
  // trunk ring, enough to keep these disks at their large-read rate.
  io::BatchReaderOptions ro;
  ro.queue_depth = 4;
  ro.chunk_bytes = 4ull << 20;
  FLOTILLA_ASSIGN_OR_RETURN(
      v->reader_,
      io::MakeBatchReader(options.reader_factory, options.reader, ro));
  v->pass_rows_ = PassRows(vocab, v->row_bytes_, cr, options);
  for (io::AlignedBuffer& b : v->pass_bufs_) {
    FLOTILLA_ASSIGN_OR_RETURN(
        b, io::AlignedBuffer::Allocate(SpanBytes(v->pass_rows_, v->row_bytes_),
                                       true));
  }
  return v;
}

VocabStream::~VocabStream() { Drain(); }

io::AlignedRange VocabStream::RowsRange(uint64_t first, uint64_t count) const {
  return io::AlignForDirectIo(
      region_->offset + field_offset_ + first * row_bytes_, count * row_bytes_);
}

absl::Status VocabStream::VerifyRows(uint64_t first, uint64_t count,
                                     const uint8_t* rows) const {
  if (!options_.verify_checksums) return absl::OkStatus();
  const uint64_t cr = region_->chunk_rows;
  for (uint64_t c = first / cr; c * cr < first + count; ++c) {
    const uint64_t c_rows = std::min(vocab_, (c + 1) * cr) - c * cr;
    const uint8_t* p = rows + (c * cr - first) * row_bytes_;
    const uint64_t got = io::Checksum64(p, c_rows * row_bytes_);
    if (got != region_->chunk_checksums[c]) {
      return absl::DataLossError(absl::StrCat(
          "checksum mismatch in ", region_->kind, " rows ", c * cr, "..",
          c * cr + c_rows - 1, " of ", file_->path(), " at offset ",
          region_->offset + field_offset_ + c * cr * row_bytes_, ": expected ",
          io::ChecksumHex(region_->chunk_checksums[c]), ", read ",
          io::ChecksumHex(got),
          "; the file is damaged: re-run flotilla-tool pack"));
    }
  }
  return absl::OkStatus();
}

absl::Status VocabStream::EmbedRows(const std::vector<int32_t>& ids,
                                    float* out) {
  const uint64_t cr = region_->chunk_rows;
  for (size_t t = 0; t < ids.size(); ++t) {
    // The whole checksum chunk holding the row is read and verified.
    if (ids[t] < 0 || static_cast<uint64_t>(ids[t]) >= vocab_) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[t], " outside the embedding"));
    }
    const uint64_t id = static_cast<uint64_t>(ids[t]);
    const uint64_t first = id / cr * cr;
    const uint64_t count = std::min(vocab_, first + cr) - first;
    const io::AlignedRange range = RowsRange(first, count);
    FLOTILLA_RETURN_IF_ERROR(
        file_->ReadAt(range.offset, range.length, row_chunk_.data()));
    bytes_read_ += range.length;
    const uint8_t* rows = row_chunk_.data() + range.skip;
    FLOTILLA_RETURN_IF_ERROR(VerifyRows(first, count, rows));
    // The row widened to float.
    const uint8_t* row = rows + (id - first) * row_bytes_;
    float* dst = out + t * hidden_;
    if (type_ == kernels::DenseType::kBF16) {
      const uint16_t* bf16 = reinterpret_cast<const uint16_t*>(row);
      for (uint64_t i = 0; i < hidden_; ++i)
        dst[i] = kernels::Bf16ToF32(bf16[i]);
    } else {
      std::memcpy(dst, row, hidden_ * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status VocabStream::WaitPass(uint64_t pass) {
  absl::Status status;
  auto early =
      std::find_if(landed_.begin(), landed_.end(),
                   [&](const io::ReadCompletion& c) { return c.tag == pass; });
  if (early != landed_.end()) {
    status = early->status;
    landed_.erase(early);
  } else {
    while (true) {
      FLOTILLA_ASSIGN_OR_RETURN(io::ReadCompletion done, reader_->WaitOne());
      if (done.tag == pass) {
        status = done.status;
        break;
      }
      landed_.push_back(std::move(done));
    }
  }
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("reading ", region_->kind, " rows from ",
                                   pass * pass_rows_, ": ", status.message()));
}

void VocabStream::Drain() {
  while (reader_ != nullptr && reader_->in_flight() > 0) {
    if (!reader_->WaitOne().ok()) break;
  }
  landed_.clear();
}

absl::Status VocabStream::LmHead(const float* x, size_t rows, float* logits,
                                 kernels::ThreadPool* pool) {
  const uint64_t passes = (vocab_ + pass_rows_ - 1) / pass_rows_;
  auto submit = [&](uint64_t pass) {
    const uint64_t first = pass * pass_rows_;
    const io::AlignedRange range =
        RowsRange(first, std::min(pass_rows_, vocab_ - first));
    return reader_->Submit({io::ReadRequest{
        file_, range.offset, range.length, pass_bufs_[pass % 2].data(), pass}});
  };
  part_.resize(rows * pass_rows_);
  absl::Status status = submit(0);
  for (uint64_t pass = 0; status.ok() && pass < passes; ++pass) {
    // The next pass's buffer held the pass before this one: free by now.
    if (pass + 1 < passes) status = submit(pass + 1);
    if (status.ok()) status = WaitPass(pass);
    if (!status.ok()) break;
    const uint64_t first = pass * pass_rows_;
    const uint64_t n = std::min(pass_rows_, vocab_ - first);
    const io::AlignedRange range = RowsRange(first, n);
    bytes_read_ += range.length;
    const uint8_t* data = pass_bufs_[pass % 2].data() + range.skip;
    status = VerifyRows(first, n, data);
    if (!status.ok()) break;
    // Each logit is one row's dot product, computed as with a pinned
    // lm_head, so streaming cannot change a bit of the result.
    kernels::DenseMatrix m;
    m.type = type_;
    m.data = data;
    m.rows = n;
    m.cols = hidden_;
    kernels::MatMul(m, x, rows, part_.data(), pool);
    for (size_t t = 0; t < rows; ++t) {
      std::memcpy(logits + t * vocab_ + first, part_.data() + t * n,
                  n * sizeof(float));
    }
  }
  if (!status.ok()) Drain();  // no read may land in a buffer later reused
  return status;
}

}  // namespace flotilla::coordinator
