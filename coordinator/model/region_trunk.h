// A family's trunk kept as pack regions (shared/pack: one per layer,
// "globals", "embed", "lm_head", laid out by the family's schema): built in
// memory from the checkpoint, or streamed from a pack through a LayerSource
// (coordinator/stream/region_ring.h: a pinned prefix plus a ring of slots
// read ahead and checked against their checksums). Either way each layer is
// bound into the family's views by one RegionBinder, so a family writes
// only its binder; the final norm, embedding and lm_head stay resident.
//
// Thread-compatibility: one forward pass at a time.
#ifndef FLOTILLA_COORDINATOR_MODEL_REGION_TRUNK_H_
#define FLOTILLA_COORDINATOR_MODEL_REGION_TRUNK_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/layer_source.h"
#include "shared/family/family.h"
#include "shared/io/aligned_buffer.h"
#include "shared/kernels/kernels.h"
#include "shared/model/tensor_source.h"
#include "shared/pack/region_layout.h"

namespace flotilla::coordinator {

class RegionTrunk {
 public:
  // Every region built in memory from `source` by `config`'s schemas.
  static absl::StatusOr<std::unique_ptr<RegionTrunk>> InMemory(
      const model::TensorSource& source, const family::FamilyConfig& config,
      const RegionBinder& binder);
  // From a pack's streamed layers (opened with the same binder): the
  // globals, embedding and lm_head regions are read, verified and kept
  // resident, then `layers` starts.
  static absl::StatusOr<std::unique_ptr<RegionTrunk>> FromLayers(
      std::unique_ptr<LayerSource> layers, int num_layers);

  // Once at the start of every forward step.
  absl::Status BeginStep();
  // What the binder made of `layer`, valid until Release(layer); layers in
  // order, once per step.
  absl::StatusOr<const BoundRegion*> Acquire(int layer);
  void Release(int layer);

  const float* final_norm() const { return final_norm_; }  // [hidden]
  const kernels::DenseMatrix& embed() const { return embed_; }
  const kernels::DenseMatrix& lm_head() const { return lm_head_; }
  // Bytes held in RAM: resident regions plus the ring's slots.
  uint64_t resident_bytes() const;
  int pinned_layers() const;
  TrunkStats stats() const;  // zeros in memory
  const LayerSource* layers() const { return layers_.get(); }  // null in memory

 private:
  RegionTrunk() = default;
  // Binds the globals' final_norm and the vocabulary regions' matrices.
  absl::Status BindModelLevel(const pack::RegionLayout& globals,
                              const uint8_t* globals_data,
                              const pack::RegionLayout& embed,
                              const uint8_t* embed_data,
                              const pack::RegionLayout& head,
                              const uint8_t* head_data);

  int num_layers_ = 0;
  std::vector<pack::Region> regions_;                // in memory
  std::vector<std::unique_ptr<BoundRegion>> bound_;  // in memory, by layer
  std::unique_ptr<LayerSource> layers_;              // from a pack
  std::vector<io::AlignedBuffer> resident_;          // from a pack
  const float* final_norm_ = nullptr;
  kernels::DenseMatrix embed_, lm_head_;
  uint64_t resident_bytes_ = 0;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_REGION_TRUNK_H_
