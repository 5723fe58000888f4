// Embedding rows and lm_head passes read from the pack's vocab regions when
// the memory plan does not pin them. Every byte is checked against the
// region's per-chunk checksums (pack::kVocabChunkRows rows each) before use.
//
// The lm_head streams through two buffers: the read of pass k + 1 is in
// flight while pass k is verified and multiplied, so the disk does not idle
// behind the matmul (the trunk ring is usually full at that point of a
// token). Both buffers are allocated up front and are what the memory plan
// charges as "lm_head.stream_buffers".
//
// Thread-compatibility: one thread (the forward pass) calls EmbedRows and
// LmHead; bytes_read() may be read from any thread.
#ifndef FLOTILLA_COORDINATOR_STREAM_VOCAB_STREAM_H_
#define FLOTILLA_COORDINATOR_STREAM_VOCAB_STREAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/batch_reader.h"
#include "shared/io/file.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/thread_pool.h"
#include "shared/pack/pack_manifest.h"
#include "shared/plan/memory_plan.h"

namespace flotilla::coordinator {

struct VocabStreamOptions {
  uint64_t lm_head_pass_bytes = plan::kLmHeadPassBytes;  // whole chunks
  bool verify_checksums = true;
  io::ReaderKind reader = io::ReaderKind::kAuto;
  io::ReaderFactory reader_factory;  // empty: io::CreateBatchReader
};

// Bytes of the two lm_head pass buffers for `row_bytes`-byte rows, as
// allocated by VocabStream (the memory plan charges exactly this).
uint64_t LmHeadStreamBufferBytes(uint64_t vocab, uint64_t row_bytes,
                                 uint64_t chunk_rows,
                                 const VocabStreamOptions& options);

class VocabStream {
 public:
  enum class Use { kEmbedRows, kLmHead };

  // `region` is the embed or lm_head region of `file` (which must outlive
  // this object); its "matrix" field starts `field_offset` bytes in and
  // holds [vocab][hidden] elements of `type`.
  static absl::StatusOr<std::unique_ptr<VocabStream>> Create(
      const io::File* file, const pack::PackRegion* region,
      uint64_t field_offset, kernels::DenseType type, uint64_t vocab,
      uint64_t hidden, Use use, const VocabStreamOptions& options);
  ~VocabStream();

  // Writes row id of each of `ids` as floats (Use::kEmbedRows);
  // InvalidArgument for an id outside the vocabulary.
  absl::Status EmbedRows(const std::vector<int32_t>& ids, float* out);

  // logits[t][v] = row v . x[t] for every vocab row, the same dot product
  // as a pinned lm_head's MatMul, so streaming changes no bit
  // (Use::kLmHead).
  absl::Status LmHead(const float* x, size_t rows, float* logits,
                      kernels::ThreadPool* pool);

  uint64_t bytes_read() const { return bytes_read_.load(); }

 private:
  VocabStream() = default;
  // Aligned file range covering rows [first, first + count).
  io::AlignedRange RowsRange(uint64_t first, uint64_t count) const;
  // Checks every chunk of rows [first, first + count), whose bytes start at
  // `rows` (first is a chunk boundary).
  absl::Status VerifyRows(uint64_t first, uint64_t count,
                          const uint8_t* rows) const;
  // Waits for the lm_head read tagged `tag`, remembering others that land.
  absl::Status WaitPass(uint64_t tag);
  void Drain();

  const io::File* file_ = nullptr;
  const pack::PackRegion* region_ = nullptr;
  uint64_t field_offset_ = 0;
  kernels::DenseType type_ = kernels::DenseType::kBF16;
  uint64_t vocab_ = 0, hidden_ = 0, row_bytes_ = 0, pass_rows_ = 0;
  VocabStreamOptions options_;
  std::unique_ptr<io::BatchReader> reader_;
  io::AlignedBuffer row_chunk_;             // one chunk, for embedding rows
  io::AlignedBuffer pass_bufs_[2];          // lm_head passes
  std::vector<float> part_;                 // one pass's logits
  std::vector<io::ReadCompletion> landed_;  // returned early by WaitOne
  std::atomic<uint64_t> bytes_read_{0};
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_STREAM_VOCAB_STREAM_H_
