#include "coordinator/families/kimi_k3/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "shared/base/status_macros.h"
#include "shared/kernels/kernels.h"

namespace flotilla::coordinator {
namespace {

// y = W_down SiTU(W_gate x, W_up x), the gated MLP shared by the dense layer
// and the shared experts.
void GatedMlp(const Matrix& gate, const Matrix& up, const Matrix& down,
              const model::K3Config& c, const float* x, size_t n, float* out,
              kernels::ThreadPool* pool) {
  const size_t width = gate.rows;
  std::vector<float> g(n * width), u(n * width), a(n * width);
  kernels::MatMul(gate.view(), x, n, g.data(), pool);
  kernels::MatMul(up.view(), x, n, u.data(), pool);
  kernels::SituGlu(g.data(), u.data(), n * width, c.situ_beta,
                   c.situ_linear_beta, a.data());
  kernels::MatMul(down.view(), a.data(), n, out, pool);
}

}  // namespace

RouterSpec K3RouterSpec(const model::K3Config& c, int top_k) {
  RouterSpec spec;
  spec.scoring = RouterSpec::Scoring::kSigmoid;
  spec.num_experts = c.num_experts;
  spec.top_k = top_k;
  spec.renormalize = c.moe_renormalize;
  spec.renormalize_epsilon = 1e-20;
  spec.scaling = c.routed_scaling_factor;
  return spec;
}

absl::Status MoeForward(const MoeWeights& w, const model::K3Config& c,
                        int layer, const float* x, int steps,
                        ExpertBackend* experts, float* out,
                        kernels::ThreadPool* pool) {
  const size_t n = steps, e = c.hidden_size, ne = c.num_experts,
               k = c.num_experts_per_token, lat = c.routed_expert_hidden_size;
  // Route every token of the step, then hand all tasks over at once.
  std::vector<float> logits(n * ne);
  kernels::MatMul(w.router.view(), x, n, logits.data(), pool);
  std::vector<ExpertTask> tasks;
  Route(K3RouterSpec(c, static_cast<int>(k)), logits.data(), w.bias.data(), n,
        &tasks);
  std::vector<float> z(n * lat), u(n * lat);
  kernels::MatMul(w.down.view(), x, n, z.data(), pool);
  FLOTILLA_RETURN_IF_ERROR(
      experts->ComputeLayer(layer, z.data(), steps, tasks, u.data()));
  experts->RecordRouted(layer, tasks.size());
  if (c.latent_moe_use_norm) {
    for (size_t t = 0; t < n; ++t) {
      kernels::RmsNorm(u.data() + t * lat, w.latent_norm.data(), lat,
                       c.rms_norm_eps, u.data() + t * lat);
    }
  }
  kernels::MatMul(w.up.view(), u.data(), n, out, pool);
  if (c.num_shared_experts > 0) {
    std::vector<float> shared(n * e);
    GatedMlp(w.shared_gate, w.shared_up, w.shared_down, c, x, n, shared.data(),
             pool);
    for (size_t i = 0; i < n * e; ++i) out[i] += shared[i];
  }
  return absl::OkStatus();
}

std::vector<int> RoutedExpertUnion(const MoeWeights& w,
                                   const model::K3Config& c, const float* x,
                                   int steps, int extra,
                                   kernels::ThreadPool* pool) {
  const int ne = c.num_experts;
  const int k = std::min(ne, c.num_experts_per_token + std::max(0, extra));
  std::vector<float> logits(static_cast<size_t>(steps) * ne);
  kernels::MatMul(w.router.view(), x, steps, logits.data(), pool);
  std::vector<ExpertTask> tasks;
  Route(K3RouterSpec(c, k), logits.data(), w.bias.data(), steps, &tasks);
  std::vector<int> all;
  for (const ExpertTask& t : tasks) all.push_back(t.expert);
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

void DenseFfnForward(const DenseFfnWeights& w, const model::K3Config& c,
                     const float* x, int steps, float* out,
                     kernels::ThreadPool* pool) {
  GatedMlp(w.gate, w.up, w.down, c, x, steps, out, pool);
}

}  // namespace flotilla::coordinator
