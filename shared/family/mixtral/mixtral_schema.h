// The trunk regions of a Mixtral pack (the fields each region holds,
// pack::FieldSpec): shared by `flotilla-tool pack`,
// which builds the regions, and the coordinator, which binds views into
// them. One region per layer (norms, attention, router), "globals" (the
// final norm), "embed" and "lm_head" (the embedding again when tied).
#ifndef FLOTILLA_SHARED_FAMILY_MIXTRAL_MIXTRAL_SCHEMA_H_
#define FLOTILLA_SHARED_FAMILY_MIXTRAL_MIXTRAL_SCHEMA_H_

#include <vector>

#include "shared/family/mixtral/mixtral_config.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::family::mixtral {

// Fields: input_norm, post_norm (vectors [hidden]); q_proj, k_proj,
// v_proj, o_proj, router (matrices as stored).
std::vector<pack::FieldSpec> LayerSchema(const model::MixtralConfig& config,
                                         int layer);
// Field: final_norm.
std::vector<pack::FieldSpec> GlobalsSchema(const model::MixtralConfig& config);
// Field: matrix [vocab][hidden].
std::vector<pack::FieldSpec> VocabSchema(const model::MixtralConfig& config,
                                         bool lm_head);

}  // namespace flotilla::family::mixtral

#endif  // FLOTILLA_SHARED_FAMILY_MIXTRAL_MIXTRAL_SCHEMA_H_
