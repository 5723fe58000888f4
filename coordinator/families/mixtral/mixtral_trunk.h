// Where a Mixtral model's trunk weights come from: regions laid out by
// shared/family/mixtral/mixtral_schema.h, either built in memory from the
// checkpoint or read from a pack (`flotilla-tool pack`) through a LayerSource
// (the family-neutral ring of coordinator/stream/region_ring.h: layers [0,
// pinned_layers) read once, the others read ahead of the forward pass into a
// ring of slots and checked against their XXH3 checksums before use, so a
// budget smaller than the trunk still runs and a bad byte on disk is an error
// naming the layer, file and offset, never wrong output). The embedding,
// lm_head and final norm stay resident.
//
// Thread-compatibility: one forward pass at a time.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_MIXTRAL_MIXTRAL_TRUNK_H_
#define FLOTILLA_COORDINATOR_FAMILIES_MIXTRAL_MIXTRAL_TRUNK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/layer_source.h"
#include "shared/family/mixtral/mixtral_config.h"
#include "shared/io/aligned_buffer.h"
#include "shared/kernels/kernels.h"
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

class MixtralTrunk {
 public:
  // Every region built in memory from `source`.
  static absl::StatusOr<std::unique_ptr<MixtralTrunk>> InMemory(
      const model::TensorSource& source, const model::MixtralConfig& config);
  // From a pack's streamed layers (`layers`, opened with LayerBinder): the
  // globals, embedding and lm_head are read and verified through it and
  // stay resident, then it starts.
  static absl::StatusOr<std::unique_ptr<MixtralTrunk>> FromLayers(
      std::unique_ptr<LayerSource> layers, const model::MixtralConfig& config);
  // How a pack's layer regions are bound for the forward pass.
  static RegionBinder LayerBinder(const model::MixtralConfig& config);

  // Once at the start of every forward step.
  absl::Status BeginStep();
  // Valid until ReleaseLayer(layer); layers in order, once per step.
  absl::StatusOr<const MixtralLayerView*> AcquireLayer(int layer);
  void ReleaseLayer(int layer);

  const float* final_norm() const { return final_norm_; }
  const kernels::DenseMatrix& embed() const { return embed_; }
  const kernels::DenseMatrix& lm_head() const { return lm_head_; }
  // Bytes held in RAM: resident regions plus the ring's slots.
  uint64_t resident_bytes() const;
  int pinned_layers() const;
  // The streamed layers' reads (zeros in memory).
  TrunkStats stats() const;
  // Null in memory.
  const LayerSource* layers() const { return layers_.get(); }

 private:
  MixtralTrunk() = default;

  model::MixtralConfig config_;
  std::vector<pack::Region> regions_;    // in memory: every region
  std::vector<MixtralLayerView> views_;  // in memory: by layer
  // From a pack: the streamed layers, and the resident model-level regions.
  std::unique_ptr<LayerSource> layers_;
  std::vector<io::AlignedBuffer> resident_;
  const float* final_norm_ = nullptr;
  kernels::DenseMatrix embed_, lm_head_;
  uint64_t resident_bytes_ = 0;  // regions_ or resident_
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_MIXTRAL_MIXTRAL_TRUNK_H_
