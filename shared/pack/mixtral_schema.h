// The trunk regions of a Mixtral pack (the fields each region holds), the
// Mixtral counterpart of trunk_schema.h: shared by `flotilla-tool pack`,
// which builds the regions, and the coordinator, which binds views into
// them. One region per layer (norms, attention, router), "globals" (the
// final norm), "embed" and "lm_head" (the embedding again when tied).
#ifndef FLOTILLA_SHARED_PACK_MIXTRAL_SCHEMA_H_
#define FLOTILLA_SHARED_PACK_MIXTRAL_SCHEMA_H_

#include <vector>

#include "shared/model/mixtral_config.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::pack {

// Fields: input_norm, post_norm (vectors [hidden]); q_proj, k_proj,
// v_proj, o_proj, router (matrices as stored).
std::vector<FieldSpec> MixtralLayerSchema(const model::MixtralConfig& config,
                                          int layer);
// Field: final_norm.
std::vector<FieldSpec> MixtralGlobalsSchema(const model::MixtralConfig& config);
// Field: matrix [vocab][hidden].
std::vector<FieldSpec> MixtralVocabSchema(const model::MixtralConfig& config,
                                          bool lm_head);

}  // namespace flotilla::pack

#endif  // FLOTILLA_SHARED_PACK_MIXTRAL_SCHEMA_H_
