// StreamingTrunk: Kimi K3's trunk weights from a packed trunk file
// (flotilla-tool pack) within a memory plan. Its layers go through the
// family-neutral RegionRing (region_ring.h: pinned prefix, ring, reader and
// verifier threads, checksums), bound as K3 LayerWeights. Unpinned
// embedding rows are read on demand and the unpinned lm_head is applied
// chunk by chunk, each chunk verified.
//
// Thread-safety: one forward pass at a time calls the TrunkProvider methods.
#ifndef FLOTILLA_COORDINATOR_STREAM_STREAMING_TRUNK_H_
#define FLOTILLA_COORDINATOR_STREAM_STREAMING_TRUNK_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coordinator/families/kimi_k3/trunk.h"
#include "coordinator/stream/region_ring.h"
#include "coordinator/stream/vocab_stream.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/batch_reader.h"
#include "shared/io/file.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::coordinator {

struct StreamingTrunkOptions {
  RegionRingOptions ring;  // the layers: pack, pinned prefix, ring, reads
  bool lm_head_pinned = true;
  bool embed_pinned = true;
  // One lm_head pass when streamed (VocabStreamOptions::lm_head_pass_bytes).
  uint64_t lm_head_chunk_bytes = VocabStreamOptions().lm_head_pass_bytes;
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
  bool direct_io() const { return ring_->direct_io(); }
  const char* reader_name() const { return ring_->reader_name(); }

 private:
  StreamingTrunk() = default;

  model::K3Config config_;
  StreamingTrunkOptions options_;
  // Declared first: the vocab streams read through its file.
  std::unique_ptr<RegionRing> ring_;
  io::AlignedBuffer globals_buf_, embed_buf_, lm_head_buf_;
  GlobalWeights globals_;
  Matrix embed_, lm_head_;  // valid when pinned
  // Vocab regions that are not pinned (null when pinned).
  std::unique_ptr<VocabStream> embed_stream_, lm_head_stream_;
  // Vocab bytes read before the last ResetStats (embedding, lm_head).
  mutable std::mutex mu_;
  uint64_t embed_bytes_at_reset_ = 0;    // guarded by mu_
  uint64_t lm_head_bytes_at_reset_ = 0;  // guarded by mu_
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_STREAM_STREAMING_TRUNK_H_
