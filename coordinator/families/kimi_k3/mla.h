// Gated Multi-head Latent Attention without positional encoding (NoPE),
// docs/k3-architecture.md section 3 "Gated MLA". The cache keeps only the
// normalised latent c_kv and the shared k_rope per position (the "latent
// cache"); kv_b is absorbed into the query side (W_UK^T q_nope) and the
// output side (W_UV applied to the probability-weighted latent), which is
// exact in real arithmetic and costs kv_lora + rope floats per position.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MLA_H_
#define FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MLA_H_

#include <cstddef>
#include <vector>

#include "coordinator/families/kimi_k3/weights.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {

// Carried per sequence per MLA layer.
struct MlaCache {
  std::vector<float> c_kv;    // [positions][kv_lora], after kv_a_layernorm
  std::vector<float> k_rope;  // [positions][rope]
  size_t positions = 0;

  // Memory held (capacity: the cache grows by appending).
  size_t bytes() const { return (c_kv.capacity() + k_rope.capacity()) * 4; }
};

// Runs `steps` new tokens (x: [steps][E], normalised input) attending to the
// cached positions plus themselves (causal). Appends them to `cache`.
// out: [steps][E].
void MlaForward(const MlaWeights& w, const model::K3Config& config,
                const float* x, int steps, MlaCache* cache, float* out,
                kernels::ThreadPool* pool);

// MLA over the rows of a step shared by several sequences: sequence i's
// rows are x rows [offsets[i], offsets[i + 1]) (offsets.size() ==
// caches.size() + 1, as StepRows::offset), attending to caches[i]. The
// projections run once over all rows (batch matmuls), attention per
// sequence against its own cache. Every row's output equals MlaForward's
// for its sequence alone.
void MlaForwardRows(const MlaWeights& w, const model::K3Config& config,
                    const float* x, const std::vector<size_t>& offsets,
                    const std::vector<MlaCache*>& caches, float* out,
                    kernels::ThreadPool* pool);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MLA_H_
