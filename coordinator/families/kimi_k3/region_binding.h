// Views of the forward pass into trunk regions (shared/pack/region_layout.h):
// a region's bytes, in RAM or in a ring slot, become LayerWeights /
// GlobalWeights / a vocab Matrix without a copy. Every field's dtype and
// shape is checked against the config's schema first, so a stale or
// corrupt layout is an error, never a misread tensor.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_REGION_BINDING_H_
#define FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_REGION_BINDING_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "coordinator/families/kimi_k3/weights.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/pack/region_layout.h"

namespace flotilla::coordinator {

// `base` must hold layout.size bytes and outlive the views.
absl::StatusOr<LayerWeights> BindLayer(const pack::RegionLayout& layout,
                                       const uint8_t* base,
                                       const model::K3Config& config, int layer,
                                       int parts = pack::kAllLayerParts);
absl::StatusOr<GlobalWeights> BindGlobals(const pack::RegionLayout& layout,
                                          const uint8_t* base,
                                          const model::K3Config& config);
absl::StatusOr<Matrix> BindVocab(const pack::RegionLayout& layout,
                                 const uint8_t* base,
                                 const model::K3Config& config);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_REGION_BINDING_H_
