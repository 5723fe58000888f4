// Kimi Delta Attention (KDA): the linear-attention layer with a fixed-size
// per-head recurrent state. Equations: docs/k3-architecture.md section 3 "KDA".
// The conv and recurrence run in float32 with double-accumulated dot
// products; the projections use the shared kernels.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_KDA_H_
#define FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_KDA_H_

#include <vector>

#include "coordinator/families/kimi_k3/weights.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {

// Carried per sequence per KDA layer.
struct KdaState {
  std::vector<float> s;  // [H][D(key)][D(value)], starts at zero
  // Previous K-1 pre-conv inputs per channel, oldest first: [P][K-1].
  std::vector<float> conv_q, conv_k, conv_v;

  // Speculative decoding: with keep_undo, each KdaForward first keeps the
  // state it starts from and then every token's pre-conv inputs and
  // recurrence inputs, so KdaUndo can rebuild the state after any of its
  // tokens exactly, from these alone (no weights, no second pass).
  struct Undo {
    std::vector<float> s, conv_q, conv_k, conv_v;  // before the forward
    std::vector<float> pre_q, pre_k, pre_v;        // [steps][P]
    std::vector<float> q, k, v, alpha;             // [steps][P]
    std::vector<float> beta;                       // [steps][H]
    int steps = 0;
  };
  bool keep_undo = false;
  Undo undo;
};

// Rebuilds `state` as it was after the first `keep` tokens of its last
// KdaForward (0 <= keep <= undo.steps), from its Undo; the same arithmetic
// in the same order as the forward, so the state is bitwise the one a
// forward over just those tokens leaves.
void KdaUndo(const model::K3Config& config, int keep, KdaState* state);

void InitKdaState(const model::K3Config& config, KdaState* state);

// Causal depthwise conv with SiLU fused: out[t][c] = SiLU(sum_j w[c][j] *
// x[t-K+1+j][c]), where inputs before t=0 come from `state` ([C][K-1],
// oldest first), which is updated to the last K-1 inputs.
void ShortConvSilu(const float* weight, int kernel, int channels,
                   const float* in, int steps, float* state, float* out);

// g[h*D+d] = lower_bound * sigmoid(exp(a_log[h]) * (z[h*D+d] + dt_bias)),
// alpha = exp(g). One token.
void KdaDecay(const float* z, const float* a_log, const float* dt_bias,
              float lower_bound, int heads, int head_dim, float* g,
              float* alpha);

// Per-head L2 normalisation x / sqrt(sum x^2 + 1e-6), in place.
void L2NormalizeHeads(float* x, int heads, int head_dim);

// The recurrence step itself is kernels::KdaRecurrentStep
// (shared/kernels/recurrent.h), where doctor can time it too.

// Whole KDA block over `steps` tokens. x: [steps][E] (already normalised by
// input_layernorm). out: [steps][E]. Carries `state`.
void KdaForward(const KdaWeights& w, const model::K3Config& config,
                const float* x, int steps, KdaState* state, float* out,
                kernels::ThreadPool* pool);

// The KDA block over the rows of a step shared by several sequences:
// sequence i's rows are x rows [offsets[i], offsets[i + 1]) (as
// StepRows::offset), carrying states[i]. The projections run once over all
// rows (batch matmuls), the convolutions and the recurrence per sequence.
// Every row's output equals KdaForward's for its sequence alone.
void KdaForwardRows(const KdaWeights& w, const model::K3Config& config,
                    const float* x, const std::vector<size_t>& offsets,
                    const std::vector<KdaState*>& states, float* out,
                    kernels::ThreadPool* pool);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_KDA_H_
