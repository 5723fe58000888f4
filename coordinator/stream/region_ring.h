// RegionRing: the trunk layers of a pack (flotilla-tool pack) within a
// memory plan, for a model of any family. Layers [0, pinned_layers) are
// read once and stay resident; the others stream through a ring of
// `ring_slots` buffers: a reader thread keeps the disk busy with the next
// layers (O_DIRECT, one large chunked read per region through a
// BatchReader) while the current layer computes, cycling through the
// unpinned layers token after token. A verifier thread checks every region
// against its XXH3 checksum as it lands and hands its bytes to the family's
// binder, so a flipped byte on disk is an error naming the layer, file and
// offset, never silently wrong output.
//
// The family sees its own bound views (a BoundRegion subclass made by its
// RegionBinder) through the LayerSource interface
// (coordinator/model/layer_source.h); the ring never looks inside a region.
//
// Thread-safety: one forward pass at a time calls BeginStep, Acquire, Peek
// and Release; the reader and verifier threads are internal.
#ifndef FLOTILLA_COORDINATOR_STREAM_REGION_RING_H_
#define FLOTILLA_COORDINATOR_STREAM_REGION_RING_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/layer_source.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/batch_reader.h"
#include "shared/io/file.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::coordinator {

struct RegionRingOptions {
  std::string pack_dir;
  int pinned_layers = 0;
  int ring_slots = 2;  // >= 2 when some layer is not pinned
  bool verify_checksums = true;
  io::ReaderKind reader = io::ReaderKind::kAuto;
  io::ReaderFactory reader_factory;  // empty: io::CreateBatchReader
  // Pieces in the kernel at once for every trunk read: the pinned layers at
  // start, then the ring.
  int queue_depth = 8;
  // Ring reads are split into pieces of this size (io::BatchReaderOptions).
  uint64_t chunk_bytes = 8ull << 20;
};

class RegionRing : public LayerSource {
 public:
  // Opens the pack's trunk file and checks every layer's region; reads
  // nothing yet (ReadRegion works, for the family's model-level regions).
  static absl::StatusOr<std::unique_ptr<RegionRing>> Open(
      const pack::PackManifest& manifest, int num_layers, RegionBinder bind,
      const RegionRingOptions& options);
  ~RegionRing() override;

  absl::Status Start() override;
  absl::Status BeginStep() override;
  absl::StatusOr<const BoundRegion*> Acquire(int layer) override;
  void Release(int layer) override;
  const BoundRegion* Peek(int layer) override;
  // With the pinned reader.
  absl::Status ReadRegion(const pack::PackRegion& r, uint8_t* dst) override;
  const pack::PackManifest& manifest() const override { return manifest_; }
  int pinned_layers() const override { return options_.pinned_layers; }
  uint64_t resident_bytes() const override;

  TrunkStats stats() const override;
  void ResetStats() override;
  bool direct_io() const override { return file_.direct(); }
  const char* reader_name() const override;
  io::File* file() { return &file_; }

  // "layer 7", "lm_head", ... for messages.
  static std::string RegionName(const pack::PackRegion& r);

 private:
  struct Slot {
    io::AlignedBuffer buffer;
    uint64_t item = UINT64_MAX;  // stream position held (see ItemLayer)
    bool ready = false;          // the read finished (`status` says how)
    bool in_use = false;
    std::chrono::steady_clock::time_point submitted;  // the read's start
    // Set (under mu_) by the verifier once it has checksummed and bound the
    // landed bytes; `status` and `bound` are then final. Between `ready`
    // and `checked` only the verifier touches `status` and `bound`.
    bool checked = false;
    absl::Status status;
    std::unique_ptr<BoundRegion> bound;
  };
  struct Pinned {
    io::AlignedBuffer buffer;
    std::unique_ptr<BoundRegion> bound;
  };

  RegionRing() = default;
  absl::Status ReadWith(const pack::PackRegion& r, io::BatchReader* reader,
                        uint8_t* dst);
  absl::Status VerifyRegion(const pack::PackRegion& r, const uint8_t* data,
                            const std::string& what) const;
  void ReaderLoop();
  // Verifies and binds each landed slot in stream order (its own thread).
  void VerifierLoop();
  int ItemLayer(uint64_t item) const {
    return options_.pinned_layers + static_cast<int>(item % unpinned_);
  }

  pack::PackManifest manifest_;
  std::vector<const pack::PackRegion*> regions_;  // per layer
  RegionBinder bind_;
  RegionRingOptions options_;
  int num_layers_ = 0;
  uint64_t max_unpinned_ = 0;  // a ring slot's size
  bool started_ = false;
  io::File file_;
  std::unique_ptr<io::BatchReader> pinned_reader_;
  std::vector<Pinned> pinned_;

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

#endif  // FLOTILLA_COORDINATOR_STREAM_REGION_RING_H_
