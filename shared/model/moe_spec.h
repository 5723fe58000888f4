// What every part that stores, moves or computes routed experts needs to
// know about a model, whatever its family: the (layer, expert) grid, the
// expert matrix shapes and the gated activation. Each family's config
// derives one (K3Config::Moe, MixtralConfig::Moe), so the expert index,
// executor, streaming backend, workers and their RPCs stay family-neutral.
#ifndef FLOTILLA_SHARED_MODEL_MOE_SPEC_H_
#define FLOTILLA_SHARED_MODEL_MOE_SPEC_H_

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "shared/model/tensor_names.h"

namespace flotilla::model {

// The gated activation act(g, u) of an expert (MoeSpec::Activation): the
// SiTU-GLU betas, or with swiglu_limit > 0 the clamped SwiGLU.
struct GluActivation {
  float gate_clamp = std::numeric_limits<float>::infinity();
  float up_clamp = std::numeric_limits<float>::infinity();
  float swiglu_limit = 0;
  float swiglu_alpha = 0;
};

struct MoeSpec {
  int num_layers = 0;
  int first_moe_layer = 0;        // layers before it have no routed experts
  int num_experts = 0;            // per MoE layer
  int num_experts_per_token = 0;  // top-k
  // Expert y = W2 act(W1 x, W3 x): x and y are [hidden_size] (Kimi K3: the
  // latent width), W1 and W3 [intermediate_size][hidden_size].
  int hidden_size = 0;
  int intermediate_size = 0;
  // act(g, u) = [b1 tanh(g / b1) sigmoid(g)] * [b2 tanh(u / b2)] (SiTU-GLU,
  // Kimi K3). Infinite betas drop the clamps: SiLU(g) * u, the SwiGLU of
  // Mixtral and Llama.
  float gate_clamp = std::numeric_limits<float>::infinity();
  float up_clamp = std::numeric_limits<float>::infinity();
  // When > 0, act is gpt-oss's clamped SwiGLU instead: g' = min(g, limit),
  // u' = clamp(u, -limit, limit), act = (u' + 1) * g' sigmoid(alpha g');
  // the betas above are then unused.
  float swiglu_limit = 0;
  float swiglu_alpha = 0;
  // Each matrix of an expert adds its own bias (gpt-oss): the experts are
  // stored in the mxfp4_bias format.
  bool expert_biases = false;

  // The routed experts' tensor names (tensor_names.h): a prefix and one
  // scheme of the naming table.
  ExpertNaming expert_names;

  // Layers after num_layers that a checkpoint holds but the model never
  // runs (DeepSeek-V3's multi-token-prediction layers): their experts are
  // skipped, not refused as outside the config.
  int unused_trailing_layers = 0;
  // Dense layers past first_moe_layer (Qwen3-MoE's mlp_only_layers and
  // decoder_sparse_step), sorted.
  std::vector<int> other_dense_layers;

  GluActivation Activation() const {
    return {gate_clamp, up_clamp, swiglu_limit, swiglu_alpha};
  }

  bool IsDenseLayer(int layer) const {
    return layer < first_moe_layer ||
           std::binary_search(other_dense_layers.begin(),
                              other_dense_layers.end(), layer);
  }
  int NumMoeLayers() const {
    int n = 0;
    for (int l = 0; l < num_layers; ++l) n += IsDenseLayer(l) ? 0 : 1;
    return n;
  }
  bool IsUnusedLayer(int layer) const {
    return layer >= num_layers && layer < num_layers + unused_trailing_layers;
  }
};

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_MOE_SPEC_H_
