// The trunk regions of a Qwen3-MoE pack, field by field (pack::FieldSpec):
// one region per layer (norms, attention with its per-head q/k norms, then
// the router of an MoE layer or the SwiGLU of a dense one), "globals" (the
// final norm), "embed" and "lm_head". Matrices as stored (BF16 released).
#ifndef FLOTILLA_SHARED_FAMILY_QWEN3_MOE_QWEN3_MOE_SCHEMA_H_
#define FLOTILLA_SHARED_FAMILY_QWEN3_MOE_QWEN3_MOE_SCHEMA_H_

#include <vector>

#include "shared/family/qwen3_moe/qwen3_moe_config.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::family::qwen3_moe {

// Fields: input_norm, post_norm [hidden]; q_proj, k_proj, v_proj, o_proj;
// q_norm, k_norm [head_dim]; MoE layers router [experts][hidden], dense
// layers gate_proj, up_proj, down_proj.
std::vector<pack::FieldSpec> LayerSchema(const model::Qwen3MoeConfig& config,
                                         int layer);
// Field: final_norm.
std::vector<pack::FieldSpec> GlobalsSchema(const model::Qwen3MoeConfig& config);
// Field: matrix [vocab][hidden].
std::vector<pack::FieldSpec> VocabSchema(const model::Qwen3MoeConfig& config,
                                         bool lm_head);

}  // namespace flotilla::family::qwen3_moe

#endif  // FLOTILLA_SHARED_FAMILY_QWEN3_MOE_QWEN3_MOE_SCHEMA_H_
