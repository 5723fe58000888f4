// Where a Mixtral model's trunk weights come from: regions laid out by
// shared/pack/mixtral_schema.h, either built in memory from the checkpoint
// or read from a pack (`flotilla-tool pack`). A pack's layers
// [0, pinned_layers) are read once at open; every other layer is read into
// one buffer each time the forward pass reaches it, and checked against its
// XXH3 checksum before use, so a budget smaller than the trunk still runs
// (a bad byte on disk is an error naming the layer, never wrong output).
// The embedding, lm_head and final norm stay resident.
//
// Thread-compatibility: one forward pass at a time.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_MIXTRAL_MIXTRAL_TRUNK_H_
#define FLOTILLA_COORDINATOR_FAMILIES_MIXTRAL_MIXTRAL_TRUNK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/file.h"
#include "shared/kernels/kernels.h"
#include "shared/model/mixtral_config.h"
#include "shared/model/tensor_source.h"
#include "shared/pack/pack_manifest.h"
#include "shared/pack/region_layout.h"

namespace flotilla::coordinator {

// Views into one layer's region.
struct MixtralLayerView {
  const float* input_norm = nullptr;  // [hidden]
  const float* post_norm = nullptr;   // [hidden]
  kernels::DenseMatrix q, k, v, o, router;
};

struct MixtralTrunkStats {
  uint64_t bytes_read = 0;  // layer regions read while generating
  uint64_t layers_read = 0;
};

class MixtralTrunk {
 public:
  // Every region built in memory from `source`.
  static absl::StatusOr<std::unique_ptr<MixtralTrunk>> InMemory(
      const model::TensorSource& source, const model::MixtralConfig& config);
  // From the pack in `pack_dir` described by `manifest`; layers
  // [0, pinned_layers) stay resident.
  static absl::StatusOr<std::unique_ptr<MixtralTrunk>> FromPack(
      const pack::PackManifest& manifest, const std::string& pack_dir,
      const model::MixtralConfig& config, int pinned_layers);

  // Valid until the next AcquireLayer.
  absl::StatusOr<const MixtralLayerView*> AcquireLayer(int layer);

  const float* final_norm() const { return final_norm_; }
  const kernels::DenseMatrix& embed() const { return embed_; }
  const kernels::DenseMatrix& lm_head() const { return lm_head_; }
  // Bytes held in RAM: resident regions plus the streaming buffer.
  uint64_t resident_bytes() const { return resident_bytes_; }
  int pinned_layers() const { return pinned_; }
  MixtralTrunkStats stats() const { return stats_; }

  // Bytes of the resident part of a pack with `pinned_layers` pinned, for
  // planning before opening.
  static uint64_t PackResidentBytes(const pack::PackManifest& manifest,
                                    int pinned_layers);

 private:
  MixtralTrunk() = default;

  model::MixtralConfig config_;
  std::vector<pack::Region> regions_;  // resident regions (in memory path)
  std::vector<io::AlignedBuffer> pinned_buffers_;
  std::vector<MixtralLayerView> views_;  // by layer (pinned or in memory)
  // Streaming: the pack's trunk file, region of each layer, one buffer.
  io::File file_;
  std::vector<const pack::PackRegion*> layer_regions_;
  pack::PackManifest manifest_;
  io::AlignedBuffer stream_buffer_;
  MixtralLayerView streamed_;
  int pinned_ = 0;
  const float* final_norm_ = nullptr;
  kernels::DenseMatrix embed_, lm_head_;
  uint64_t resident_bytes_ = 0;
  MixtralTrunkStats stats_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_MIXTRAL_MIXTRAL_TRUNK_H_
