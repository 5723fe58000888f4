// Router, latent MoE and dense FFN (docs/k3-architecture.md section 3 "MoE" and
// "Dense layer 0").
#ifndef FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MOE_H_
#define FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MOE_H_

#include <vector>

#include "absl/status/status.h"
#include "coordinator/model/expert_backend.h"
#include "coordinator/families/kimi_k3/weights.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/config.h"

namespace flotilla::coordinator {

// Top-k routing for one token from raw router logits [n_experts]:
// s = sigmoid(logit) (double); selection by s + bias, descending, ties to
// the lower index; weights from the unbiased s, renormalised (w/(sum+1e-20))
// when `renormalize`, times `scale`. Writes k indices and weights in
// selection order (descending biased score).
void RouteTopK(const float* logits, const float* bias, int n_experts, int k,
               bool renormalize, float scale, int* experts, float* weights);

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
