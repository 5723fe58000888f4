// Views of the trunk weights of one Kimi K3 layer, as the forward pass uses
// them. They point into a trunk region (trunk_region.h) that holds the
// tensors in compute-ready form. Routed experts are not here: they stay on
// disk and are read per step by an ExpertBackend. Shapes use the
// docs/k3-architecture.md names: E hidden, P = H*D KDA width, Hm MLA heads, L
// latent width, I expert width.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_WEIGHTS_H_
#define FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/kernels/kernels.h"

namespace flotilla::coordinator {

// A dense matrix [rows][cols] viewed in its stored precision (BF16 stays
// BF16: widening happens inside the kernels, exactly). The bytes belong to a
// trunk region (see trunk_region.h), pinned or in a streaming ring slot.
struct Matrix {
  kernels::DenseType type = kernels::DenseType::kF32;
  const void* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;

  kernels::DenseMatrix view() const;
  // A view of rows [first, first + count).
  kernels::DenseMatrix rows_view(size_t first, size_t count) const;
  // Row r widened to float.
  void RowF32(size_t r, float* out) const;
};

// A float32 vector inside a trunk region.
using Vec = absl::Span<const float>;

struct KdaWeights {
  Matrix q_proj, k_proj, v_proj, g_proj;  // [P][E]
  Matrix o_proj;                          // [E][P]
  Matrix f_a;                             // [D][E]
  Matrix f_b;                             // [P][D]
  Matrix b_proj;                          // [H][E]
  Vec q_conv, k_conv, v_conv;             // [P][K], tap K-1 = current
  Vec a_log;                              // [H] (first H of the tensor)
  Vec dt_bias;                            // [P]
  Vec o_norm;                             // [D], shared by heads
};

struct MlaWeights {
  Matrix q_a;     // [q_lora][E]
  Vec q_a_norm;   // [q_lora]
  Matrix q_b;     // [Hm*(nope+rope)][q_lora]
  Matrix kv_a;    // [kv_lora+rope][E]
  Vec kv_a_norm;  // [kv_lora]
  Matrix kv_b;    // [Hm*(nope+v)][kv_lora]
  // Key half of kv_b transposed per head: [Hm*kv_lora][nope]; row block h
  // is W_UK_h^T, so the latent query is one matvec per head (absorption).
  Matrix uk_t;
  Matrix o_proj;  // [E][Hm*v]
  Matrix g_proj;  // [Hm*v][E]
};

struct DenseFfnWeights {
  Matrix gate, up;  // [I_dense][E]
  Matrix down;      // [E][I_dense]
};

struct MoeWeights {
  Matrix router;                  // [n_experts][E]
  Vec bias;                       // [n_experts], selection only
  Matrix down;                    // [L][E]
  Matrix up;                      // [E][L]
  Vec latent_norm;                // [L]
  Matrix shared_gate, shared_up;  // [I*S][E]
  Matrix shared_down;             // [E][I*S]
};

struct LayerWeights {
  bool is_mla = false;
  bool is_dense = false;
  Vec input_norm, post_norm;  // [E]
  // AttnRes score weights with norm and projection folded: nw[j]*pw[j].
  Vec attn_res_fold, mlp_res_fold;  // [E]
  KdaWeights kda;
  MlaWeights mla;
  DenseFfnWeights dense;
  MoeWeights moe;
};

// Model-level vectors of the head.
struct GlobalWeights {
  Vec final_norm;    // [E]
  Vec out_res_fold;  // [E], output_attn_res norm * proj
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_WEIGHTS_H_
