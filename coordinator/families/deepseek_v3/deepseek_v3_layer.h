// One DeepSeek-V3 / Kimi K2 decoder layer bound into its region
// (shared/family/deepseek_v3/deepseek_v3_schema.h): the views the forward
// pass reads, and the attention spec the config derives (MLA with q-LoRA,
// YaRN RoPE and its mscale, upstream's interleaved RoPE pairs).
#ifndef FLOTILLA_COORDINATOR_FAMILIES_DEEPSEEK_V3_DEEPSEEK_V3_LAYER_H_
#define FLOTILLA_COORDINATOR_FAMILIES_DEEPSEEK_V3_DEEPSEEK_V3_LAYER_H_

#include "coordinator/model/latent_attention.h"
#include "coordinator/model/layer_source.h"
#include "shared/family/deepseek_v3/deepseek_v3_config.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/weight_matrix.h"

namespace flotilla::coordinator {

struct DeepSeekV3Layer : BoundRegion {
  const float* input_norm = nullptr;  // [hidden]
  const float* post_norm = nullptr;   // [hidden]
  LatentAttentionWeights attention;
  bool moe = false;
  // The dense SwiGLU (dense layers) or the shared experts (MoE layers with
  // n_shared_experts > 0): down(silu(gate x) * up x).
  bool has_ffn = false;
  kernels::WeightMatrix gate, up, down;
  // MoE layers: router logits [experts][hidden] and the correction bias
  // [experts] that only selects.
  kernels::DenseMatrix router;
  const float* router_bias = nullptr;
};

// How a DeepSeek-V3 layer region binds (in memory or streamed): checks the
// region against the schema, then views into it.
RegionBinder DeepSeekV3Binder(const model::DeepSeekV3Config& config);

// The MLA spec of `config`: head sizes, the q/kv latent norms' eps (1e-6
// whatever rms_norm_eps says, as upstream builds them), the softmax scale
// with YaRN's mscale, and the RoPE frequencies (YaRN when rope_scaling says
// so) with their attention factor.
LatentAttentionSpec DeepSeekV3AttentionSpec(
    const model::DeepSeekV3Config& config);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_DEEPSEEK_V3_DEEPSEEK_V3_LAYER_H_
