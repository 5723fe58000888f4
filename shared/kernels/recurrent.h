// The KDA (Kimi Delta Attention) recurrence step, scalar with double
// accumulation, exactly as the reference computes it. Here rather than in
// the forward pass so that `flotilla-tool doctor` can time the real step on
// this machine for its per-token prediction.
#ifndef FLOTILLA_SHARED_KERNELS_RECURRENT_H_
#define FLOTILLA_SHARED_KERNELS_RECURRENT_H_

namespace flotilla::kernels {

// One recurrence step for every head (q already scaled by D^-0.5):
// S <- diag(alpha) S; u = S^T k; S <- S + k (beta (v - u))^T; o = S^T q.
// state: [heads][head_dim][head_dim]; q, k, v, alpha, out: [heads][head_dim];
// beta: [heads].
void KdaRecurrentStep(float* state, const float* q, const float* k,
                      const float* v, const float* alpha, const float* beta,
                      int heads, int head_dim, float* out);

}  // namespace flotilla::kernels

#endif  // FLOTILLA_SHARED_KERNELS_RECURRENT_H_
