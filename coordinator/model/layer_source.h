// Where a family's trunk layers come from when they are streamed: the
// family binds its own views into a layer region's verified bytes (a
// BoundRegion), and a LayerSource hands them out one layer at a time. The
// implementation is coordinator/stream/region_ring.h (pinned prefix, ring
// of O_DIRECT reads ahead of the forward pass, checksums); families see only
// this interface, so they link no I/O library.
#ifndef FLOTILLA_COORDINATOR_MODEL_LAYER_SOURCE_H_
#define FLOTILLA_COORDINATOR_MODEL_LAYER_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/base/latency_counts.h"
#include "shared/pack/pack_manifest.h"
#include "shared/pack/region_layout.h"

namespace flotilla::coordinator {

// What a family binds into a layer's verified bytes (views into them).
struct BoundRegion {
  virtual ~BoundRegion() = default;
};
// Binds layer `layer`'s region; `data` stays valid while the result is in
// use (until its ring slot is reused, or for good when the layer is
// pinned).
using RegionBinder = std::function<absl::StatusOr<std::unique_ptr<BoundRegion>>(
    int layer, const pack::RegionLayout& layout, const uint8_t* data)>;

// A RegionBinder making `Bound` (a BoundRegion subclass) with
// `bind(layer, layout, data, &bound)`.
template <typename Bound, typename BindFn>
RegionBinder BinderOf(BindFn bind) {
  return
      [bind](
          int layer, const pack::RegionLayout& layout,
          const uint8_t* data) -> absl::StatusOr<std::unique_ptr<BoundRegion>> {
        auto bound = std::make_unique<Bound>();
        absl::Status s = bind(layer, layout, data, bound.get());
        if (!s.ok()) return s;
        return std::unique_ptr<BoundRegion>(std::move(bound));
      };
}

// Counters since the last ResetStats(), for --stats and /metrics.
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

class LayerSource {
 public:
  virtual ~LayerSource() = default;

  // Reads and binds the pinned layers, then starts streaming the rest;
  // once, before the first Acquire.
  virtual absl::Status Start() = 0;
  // Called once at the start of every forward step.
  virtual absl::Status BeginStep() = 0;
  // Blocks until layer `layer` is read, verified and bound; valid until
  // Release(layer). Layers are acquired in order, each once per step.
  virtual absl::StatusOr<const BoundRegion*> Acquire(int layer) = 0;
  virtual void Release(int layer) = 0;
  // Layer `layer` if it is resident and verified right now, else null;
  // never blocks (lookahead guesses).
  virtual const BoundRegion* Peek(int layer) = 0;
  // Reads a whole region (a family's model-level vectors, its vocabulary)
  // and verifies it: errors name the region, file and offset.
  virtual absl::Status ReadRegion(const pack::PackRegion& r, uint8_t* dst) = 0;
  virtual const pack::PackManifest& manifest() const = 0;
  virtual int pinned_layers() const = 0;
  // Bytes held: pinned layers and ring slots.
  virtual uint64_t resident_bytes() const = 0;

  virtual TrunkStats stats() const = 0;
  virtual void ResetStats() = 0;
  virtual bool direct_io() const = 0;
  virtual const char* reader_name() const = 0;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_LAYER_SOURCE_H_
