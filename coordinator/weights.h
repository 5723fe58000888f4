// In-memory trunk weights of a Kimi K3 model, bound by Hugging Face tensor
// name from any TensorSource and validated against the config. Routed
// experts are not here: they stay on disk and are read per step by an
// ExpertBackend. Shapes use the K3-ARCHITECTURE.md names: E hidden, P = H*D
// KDA width, Hm MLA heads, L latent width, I expert width.
#ifndef FLOTILLA_COORDINATOR_WEIGHTS_H_
#define FLOTILLA_COORDINATOR_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/kernels/kernels.h"
#include "shared/model/config.h"
#include "shared/model/tensor_source.h"

namespace flotilla::coordinator {

// An owned dense matrix [rows][cols], kept in its stored precision (BF16
// stays BF16: widening happens inside the kernels, exactly).
struct Matrix {
  kernels::DenseType type = kernels::DenseType::kF32;
  std::vector<uint16_t> bf16;
  std::vector<float> f32;
  size_t rows = 0;
  size_t cols = 0;

  kernels::DenseMatrix view() const;
  // A view of rows [first, first + count).
  kernels::DenseMatrix rows_view(size_t first, size_t count) const;
  // Row r widened to float.
  void RowF32(size_t r, float* out) const;
  size_t bytes() const { return bf16.size() * 2 + f32.size() * 4; }
};

struct KdaWeights {
  Matrix q_proj, k_proj, v_proj, g_proj;  // [P][E]
  Matrix o_proj;                          // [E][P]
  Matrix f_a;                             // [D][E]
  Matrix f_b;                             // [P][D]
  Matrix b_proj;                          // [H][E]
  std::vector<float> q_conv, k_conv, v_conv;  // [P][K], tap K-1 = current
  std::vector<float> a_log;                   // [H] (first H of the tensor)
  std::vector<float> dt_bias;                 // [P]
  std::vector<float> o_norm;                  // [D], shared by heads
};

struct MlaWeights {
  Matrix q_a;                  // [q_lora][E]
  std::vector<float> q_a_norm; // [q_lora]
  Matrix q_b;                  // [Hm*(nope+rope)][q_lora]
  Matrix kv_a;                 // [kv_lora+rope][E]
  std::vector<float> kv_a_norm;  // [kv_lora]
  Matrix kv_b;                 // [Hm*(nope+v)][kv_lora]
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
  Matrix router;                // [n_experts][E]
  std::vector<float> bias;      // [n_experts], selection only
  Matrix down;                  // [L][E]
  Matrix up;                    // [E][L]
  std::vector<float> latent_norm;  // [L]
  Matrix shared_gate, shared_up;   // [I*S][E]
  Matrix shared_down;              // [E][I*S]
};

struct LayerWeights {
  bool is_mla = false;
  bool is_dense = false;
  std::vector<float> input_norm, post_norm;  // [E]
  // AttnRes score weights with norm and projection folded: nw[j]*pw[j].
  std::vector<float> attn_res_fold, mlp_res_fold;  // [E]
  KdaWeights kda;
  MlaWeights mla;
  DenseFfnWeights dense;
  MoeWeights moe;
};

struct ModelWeights {
  Matrix embed;    // [V][E]
  Matrix lm_head;  // [V][E]
  std::vector<float> final_norm;     // [E]
  std::vector<float> out_res_fold;   // [E]
  std::vector<LayerWeights> layers;

  size_t bytes() const;
};

// HF name prefixes.
std::string LayerPrefix(int layer);  // "language_model.model.layers.<L>."

// Binds and validates every trunk tensor. Errors name the tensor, its file,
// and the expected vs actual dtype/shape.
absl::StatusOr<ModelWeights> LoadModelWeights(
    const model::TensorSource& source, const model::K3Config& config);

// Loaders for single pieces (also used by the layer fixture tests).
absl::StatusOr<KdaWeights> LoadKdaWeights(const model::TensorSource& source,
                                          const model::K3Config& config,
                                          int layer);
absl::StatusOr<MlaWeights> LoadMlaWeights(const model::TensorSource& source,
                                          const model::K3Config& config,
                                          int layer);
absl::StatusOr<MoeWeights> LoadMoeWeights(const model::TensorSource& source,
                                          const model::K3Config& config,
                                          int layer);
absl::StatusOr<LayerWeights> LoadLayerWeights(
    const model::TensorSource& source, const model::K3Config& config,
    int layer);

// Reads a matrix with exact shape [rows][cols] (F32/BF16 kept, F16 widened).
absl::StatusOr<Matrix> LoadMatrix(const model::TensorSource& source,
                                  const std::string& name, size_t rows,
                                  size_t cols);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_WEIGHTS_H_
