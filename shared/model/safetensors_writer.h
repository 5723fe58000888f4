// Streaming safetensors writer: lays out one shard from an ordered list of
// (name, dtype, shape, byte producer) and writes it without ever holding the
// shard in memory. Producers run on several threads into large reusable
// buffers while separate I/O threads write the previous buffers, so a
// multi-GB shard is written at disk speed with a fixed memory footprint.
//
// File format: u64 little-endian N, N bytes of JSON header (padded with
// spaces so the data area starts 8-byte aligned), then the tensors' data in
// list order, back to back, with offsets relative to the data area.
#ifndef FLOTILLA_SHARED_MODEL_SAFETENSORS_WRITER_H_
#define FLOTILLA_SHARED_MODEL_SAFETENSORS_WRITER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/model/tensor_source.h"

namespace flotilla::model {

// Producers are never asked for a range that crosses a multiple of this many
// bytes counted from the tensor's first byte, so a producer that generates
// data in independent blocks of this size needs no carry-over between calls.
inline constexpr uint64_t kFillGranule = uint64_t{1} << 20;

// Fills bytes [offset, offset + size) of one tensor's data into dst. Called
// concurrently from several threads (for disjoint ranges) and possibly more
// than once for the same range; it must depend only on its arguments for the
// file to be reproducible.
using TensorFill =
    std::function<void(uint64_t offset, uint64_t size, uint8_t* dst)>;

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  TensorFill fill;
};

// Where every byte of a shard goes; computed without writing anything.
struct ShardLayout {
  std::string header;           // JSON, space-padded to a multiple of 8
  std::vector<uint64_t> begin;  // per tensor, relative to the data area
  std::vector<uint64_t> nbytes;
  uint64_t data_bytes = 0;

  uint64_t data_start() const { return 8 + header.size(); }
  uint64_t file_bytes() const { return data_start() + data_bytes; }
};

// Validates names (non-empty, unique, not "__metadata__"), shapes (no
// negative dims, no overflow) and builds the header. `metadata` becomes the
// optional "__metadata__" object (string values) when non-empty.
absl::StatusOr<ShardLayout> LayoutShard(
    const std::vector<TensorToWrite>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata = {});

struct SafetensorsWriterOptions {
  int threads = 1;                         // producer threads, >= 1
  size_t buffer_bytes = size_t{64} << 20;  // per buffer; rounded to 4 KiB
  int buffers = 4;  // >= 2: fill one while writing the others
  // Writes in flight: two keep the device queue busy while one request
  // completes (bench/measurements.md).
  int io_threads = 2;
  // O_DIRECT keeps a multi-GB write out of the page cache (which would evict
  // everything else and stall on writeback). Falls back to buffered writes
  // where the filesystem refuses it (tmpfs).
  bool direct_io = true;
};

class SafetensorsWriter {
 public:
  // Allocates the buffers and starts the threads once, so that writing many
  // shards pays for faulting in fresh memory only once.
  static absl::StatusOr<std::unique_ptr<SafetensorsWriter>> Create(
      const SafetensorsWriterOptions& options);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Creates (truncating) `path` and writes the shard. On error the partial
  // file is removed. One call at a time.
  absl::Status WriteShard(
      const std::string& path, const std::vector<TensorToWrite>& tensors,
      const std::vector<std::pair<std::string, std::string>>& metadata = {});

  // Bytes written so far over all shards; safe to read from any thread
  // (for progress reports).
  uint64_t bytes_written() const {
    return bytes_written_.load(std::memory_order_relaxed);
  }
  // Whether the last shard was written with O_DIRECT.
  bool used_direct_io() const { return used_direct_; }

 private:
  // A range of one tensor, filled into the current buffer.
  struct Piece {
    const TensorFill* fill;
    uint64_t tensor_offset;
    uint64_t size;
    size_t buffer_offset;
  };
  struct Buffer {
    uint8_t* data = nullptr;  // aligned for O_DIRECT; freed by the writer
  };
  struct IoJob {
    int fd;
    Buffer* buffer;
    uint64_t file_offset;
    size_t length;        // bytes that belong to the file
    size_t write_length;  // length rounded up to the block size for O_DIRECT
    bool direct;
  };

  explicit SafetensorsWriter(const SafetensorsWriterOptions& options);
  void FillWorker();
  void IoWorker();
  // Runs every piece on the calling thread and the fill workers.
  void FillPieces(const std::vector<Piece>& pieces, uint8_t* base);
  void RunPieces();
  Buffer* TakeFreeBuffer();
  absl::Status WriteJob(const IoJob& job);

  SafetensorsWriterOptions options_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::atomic<uint64_t> bytes_written_{0};
  bool used_direct_ = false;
  std::string current_path_;                // for error messages
  std::atomic<bool> direct_failed_{false};  // O_DIRECT dropped mid-shard

  // Fill stage: the current batch of pieces, claimed by index.
  std::mutex fill_mu_;
  std::condition_variable fill_cv_;
  std::condition_variable fill_done_cv_;
  const std::vector<Piece>* pieces_ = nullptr;
  uint8_t* fill_base_ = nullptr;
  uint64_t fill_epoch_ = 0;
  int fill_active_ = 0;
  std::atomic<size_t> next_piece_{0};
  bool stop_ = false;
  std::vector<std::thread> fill_threads_;

  // Write stage: buffers queued for pwrite, and buffers free for filling.
  std::mutex io_mu_;
  std::condition_variable io_cv_;
  std::deque<IoJob> io_queue_;
  std::vector<Buffer*> free_;
  absl::Status io_status_;  // first write error of the current shard
  bool stop_io_ = false;
  std::vector<std::thread> io_threads_;
};

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_SAFETENSORS_WRITER_H_
