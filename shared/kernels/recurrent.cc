#include "shared/kernels/recurrent.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace flotilla::kernels {

void KdaRecurrentStep(float* state, const float* q, const float* k,
                      const float* v, const float* alpha, const float* beta,
                      int heads, int head_dim, float* out) {
  const int dd = head_dim;
  std::vector<double> acc(dd);
  std::vector<float> delta(dd);
  for (int h = 0; h < heads; ++h) {
    float* s = state + static_cast<size_t>(h) * dd * dd;
    const float* qh = q + h * dd;
    const float* kh = k + h * dd;
    const float* vh = v + h * dd;
    const float* ah = alpha + h * dd;
    // Decay rows (key channels).
    for (int i = 0; i < dd; ++i) {
      for (int j = 0; j < dd; ++j) s[i * dd + j] *= ah[i];
    }
    // u = S^T k, then the delta-rule write.
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int i = 0; i < dd; ++i) {
      for (int j = 0; j < dd; ++j) acc[j] += double{s[i * dd + j]} * kh[i];
    }
    for (int j = 0; j < dd; ++j) {
      delta[j] = beta[h] * (vh[j] - static_cast<float>(acc[j]));
    }
    for (int i = 0; i < dd; ++i) {
      for (int j = 0; j < dd; ++j) s[i * dd + j] += kh[i] * delta[j];
    }
    // Read the updated state.
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int i = 0; i < dd; ++i) {
      for (int j = 0; j < dd; ++j) acc[j] += double{s[i * dd + j]} * qh[i];
    }
    for (int j = 0; j < dd; ++j) out[h * dd + j] = static_cast<float>(acc[j]);
  }
}

}  // namespace flotilla::kernels
