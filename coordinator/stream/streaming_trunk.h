// StreamingTrunk: trunk weights from a packed trunk file (flotilla-tool
// pack) within a memory plan. Layers [0, pinned_layers) are read once and
// stay resident; the others stream through a ring of `ring_slots` buffers:
// a reader thread keeps the disk busy with the next layers (O_DIRECT, one
// large chunked read per region through a BatchReader) while the current
// layer computes, cycling through the unpinned layers token after token.
// Every region is checked against its XXH3 checksum before use, so a flipped
// byte on disk is an error naming the layer, file and offset, never silently
// wrong output. Unpinned embedding rows are read on demand and the unpinned
// lm_head is applied chunk by chunk, each chunk verified.
//
// Thread-safety: one forward pass at a time calls the TrunkProvider methods;
// the reader thread is internal.
#ifndef FLOTILLA_COORDINATOR_STREAM_STREAMING_TRUNK_H_
#define FLOTILLA_COORDINATOR_STREAM_STREAMING_TRUNK_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/model/trunk.h"
#include "coordinator/stream/vocab_stream.h"
#include "shared/base/latency_counts.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/batch_reader.h"
#include "shared/io/file.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::coordinator {

struct StreamingTrunkOptions {
  std::string pack_dir;
  int pinned_layers = 0;
  int ring_slots = 2;  // >= 2 when some layer is not pinned
  bool lm_head_pinned = true;
  bool embed_pinned = true;
  bool verify_checksums = true;
  io::ReaderKind reader = io::ReaderKind::kAuto;
  io::ReaderFactory reader_factory;  // empty: io::CreateBatchReader
  // Pieces in the kernel at once for every trunk read: the pinned layers at
  // start, then the ring.
  int queue_depth = 8;
  // Ring reads are split into pieces of this size (io::BatchReaderOptions).
  uint64_t chunk_bytes = 8ull << 20;
  // One lm_head pass when streamed (VocabStreamOptions::lm_head_pass_bytes).
  uint64_t lm_head_chunk_bytes = VocabStreamOptions().lm_head_pass_bytes;
};

// Counters since the last ResetStats(), for --stats.
struct TrunkStats {
  uint64_t bytes_read = 0;  // trunk regions + vocab chunks
  // Of bytes_read, the streamed embedding rows and lm_head passes.
  uint64_t embedding_bytes_read = 0;
  uint64_t lm_head_bytes_read = 0;
  uint64_t regions_read = 0;
  // Each ring region's read, from its submission to its completion.
  base::LatencyCounts region_read_latency;
  double read_seconds = 0;    // reader thread busy reading
  double wait_seconds = 0;    // forward pass blocked on the ring
  double verify_seconds = 0;  // verifier thread checksumming ring regions
};

class StreamingTrunk : public TrunkProvider {
 public:
  static absl::StatusOr<std::unique_ptr<StreamingTrunk>> Open(
      const pack::PackManifest& manifest, const model::K3Config& config,
      const StreamingTrunkOptions& options);
  ~StreamingTrunk() override;

  absl::Status BeginStep() override;
  absl::StatusOr<const LayerWeights*> AcquireLayer(int layer) override;
  void ReleaseLayer(int layer) override;
  const LayerWeights* PeekLayer(int layer) override;
  const GlobalWeights& globals() const override { return globals_; }
  absl::Status EmbedRows(const std::vector<int32_t>& ids, float* out) override;
  absl::Status LmHead(const float* x, size_t rows, float* logits,
                      kernels::ThreadPool* pool) override;

  TrunkStats stats() const;
  void ResetStats();
  bool direct_io() const { return file_.direct(); }
  const char* reader_name() const;

 private:
  struct Slot {
    io::AlignedBuffer buffer;
    uint64_t item = UINT64_MAX;  // stream position held (see ItemLayer)
    bool ready = false;          // the read finished (`status` says how)
    bool in_use = false;
    std::chrono::steady_clock::time_point submitted;  // the read's start
    // Set (under mu_) by the verifier once it has checksummed and bound the
    // landed bytes; `status` and `weights` are then final. Between `ready`
    // and `checked` only the verifier touches `status` and `weights`.
    bool checked = false;
    absl::Status status;
    LayerWeights weights;
  };
  struct Pinned {
    io::AlignedBuffer buffer;
    LayerWeights weights;
  };

  StreamingTrunk() = default;
  // "layer 7", "lm_head", ... for messages.
  static std::string RegionName(const pack::PackRegion& r);
  absl::Status ReadRegion(const pack::PackRegion& r, io::BatchReader* reader,
                          uint8_t* dst);
  absl::Status VerifyRegion(const pack::PackRegion& r, const uint8_t* data,
                            const std::string& what) const;
  void ReaderLoop();
  // Verifies and binds each landed slot in stream order (its own thread).
  void VerifierLoop();
  int ItemLayer(uint64_t item) const {
    return options_.pinned_layers + static_cast<int>(item % unpinned_);
  }

  model::K3Config config_;
  pack::PackManifest manifest_;
  std::vector<pack::RegionLayout> layouts_;  // per layer
  const pack::PackRegion* embed_region_ = nullptr;
  const pack::PackRegion* lm_head_region_ = nullptr;
  StreamingTrunkOptions options_;
  io::File file_;
  std::unique_ptr<io::BatchReader> pinned_reader_;
  std::vector<Pinned> pinned_;
  io::AlignedBuffer globals_buf_, embed_buf_, lm_head_buf_;
  GlobalWeights globals_;
  Matrix embed_, lm_head_;  // valid when pinned
  // Vocab regions that are not pinned (null when pinned).
  std::unique_ptr<VocabStream> embed_stream_, lm_head_stream_;
  // Vocab bytes read before the last ResetStats (embedding, lm_head).
  uint64_t embed_bytes_at_reset_ = 0;    // guarded by mu_
  uint64_t lm_head_bytes_at_reset_ = 0;  // guarded by mu_

  // Ring (guarded by mu_).
  int unpinned_ = 0;
  std::vector<Slot> slots_;
  uint64_t next_read_ = 0;     // next stream item the reader loads
  uint64_t next_consume_ = 0;  // next stream item the forward pass takes
  bool stop_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread reader_thread_;
  std::thread verifier_thread_;
  uint64_t next_verify_ = 0;  // next stream item the verifier checks
  std::unique_ptr<io::BatchReader> ring_reader_;
  TrunkStats stats_;  // guarded by mu_
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_STREAM_STREAMING_TRUNK_H_
