// The trunk regions of a DeepSeek-V3 / Kimi K2 pack, field by field
// (pack::FieldSpec): one region per decoder layer (norms, MLA, then the
// dense SwiGLU or the router, its correction bias and the shared experts),
// "globals" (the final norm), "embed" and "lm_head". With FP8 weights
// (quantization_config) each projection is a kFp8Matrix field of the codes
// as stored and a "<field>_scale_inv" vector of its 128x128 block scales;
// the embeddings, the norms and the router stay as released (BF16).
// The MTP layers after num_hidden_layers are in no region.
#ifndef FLOTILLA_SHARED_FAMILY_DEEPSEEK_V3_DEEPSEEK_V3_SCHEMA_H_
#define FLOTILLA_SHARED_FAMILY_DEEPSEEK_V3_DEEPSEEK_V3_SCHEMA_H_

#include <string>
#include <vector>

#include "shared/family/deepseek_v3/deepseek_v3_config.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::family::deepseek_v3 {

// The suffix of a projection's block-scale field ("q_a_proj_scale_inv").
inline constexpr char kScaleSuffix[] = "_scale_inv";

// Fields: input_norm, post_norm; q_a_proj, q_a_norm, q_b_proj (or q_proj
// when q_lora_rank is 0), kv_a_proj, kv_a_norm, kv_b_proj, o_proj; dense
// layers gate_proj, up_proj, down_proj; MoE layers router, router_bias,
// then shared_gate, shared_up, shared_down when there are shared experts.
std::vector<pack::FieldSpec> LayerSchema(const model::DeepSeekV3Config& config,
                                         int layer);
// Field: final_norm.
std::vector<pack::FieldSpec> GlobalsSchema(
    const model::DeepSeekV3Config& config);
// Field: matrix [vocab][hidden] (embed_tokens, or lm_head).
std::vector<pack::FieldSpec> VocabSchema(const model::DeepSeekV3Config& config,
                                         bool lm_head);

}  // namespace flotilla::family::deepseek_v3

#endif  // FLOTILLA_SHARED_FAMILY_DEEPSEEK_V3_DEEPSEEK_V3_SCHEMA_H_
