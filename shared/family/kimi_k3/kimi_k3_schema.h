// Kimi K3's trunk regions: the fields of each (pack::FieldSpec), built from
// a checkpoint or planned from the config alone.
#ifndef FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_SCHEMA_H_
#define FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_SCHEMA_H_

#include <vector>

#include "absl/status/statusor.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/model/tensor_source.h"
#include "shared/pack/region_layout.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::family::kimi_k3 {

// Fields of layer `layer`; `parts` is a pack::LayerParts mask.
std::vector<pack::FieldSpec> LayerSchema(const model::K3Config& config,
                                         int layer, int parts);
// The final norm and the output AttnRes fold.
std::vector<pack::FieldSpec> GlobalsSchema(const model::K3Config& config);
// A single [vocab][hidden] matrix: "embed" or "lm_head".
std::vector<pack::FieldSpec> VocabSchema(const model::K3Config& config,
                                         bool lm_head);

absl::StatusOr<pack::Region> BuildLayerRegion(const model::TensorSource& source,
                                              const model::K3Config& config,
                                              int layer,
                                              int parts = pack::kAllLayerParts);
absl::StatusOr<pack::Region> BuildGlobalsRegion(
    const model::TensorSource& source, const model::K3Config& config);
absl::StatusOr<pack::Region> BuildVocabRegion(const model::TensorSource& source,
                                              const model::K3Config& config,
                                              bool lm_head);

}  // namespace flotilla::family::kimi_k3

#endif  // FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_SCHEMA_H_
