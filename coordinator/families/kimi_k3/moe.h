// Router, latent MoE and dense FFN (docs/k3-architecture.md section 3 "MoE" and
// "Dense layer 0").
#ifndef FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MOE_H_
#define FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MOE_H_

#include <vector>

#include "absl/status/status.h"
#include "coordinator/families/kimi_k3/weights.h"
#include "coordinator/model/expert_backend.h"
#include "coordinator/model/router.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {

// Kimi K3's router (coordinator/model/router.h) choosing `top_k`: sigmoid
// scores, chosen by score + the layer's correction bias, weighed by the
// unbiased scores renormalised (w / (sum + 1e-20)) and scaled by
// routed_scaling_factor.
RouterSpec K3RouterSpec(const model::K3Config& config, int top_k);

// Routed + shared experts for `steps` tokens. x: [steps][E] (normalised by
// post_attention_layernorm). out: [steps][E].
absl::Status MoeForward(const MoeWeights& w, const model::K3Config& config,
                        int layer, const float* x, int steps,
                        ExpertBackend* experts, float* out,
                        kernels::ThreadPool* pool);

// The distinct experts (ascending) that `w`'s router selects for any of the
// `steps` rows of x ([steps][E], normalised), each row contributing its
// top (num_experts_per_token + extra) by biased score. Used to guess a
// layer's experts before its real MoE input exists.
std::vector<int> RoutedExpertUnion(const MoeWeights& w,
                                   const model::K3Config& config,
                                   const float* x, int steps, int extra,
                                   kernels::ThreadPool* pool);

// y = down(SiTU(gate x, up x)) for `steps` tokens.
void DenseFfnForward(const DenseFfnWeights& w, const model::K3Config& config,
                     const float* x, int steps, float* out,
                     kernels::ThreadPool* pool);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MOE_H_
