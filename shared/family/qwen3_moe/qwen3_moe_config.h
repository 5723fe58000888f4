// config.json of Qwen3-MoE (model_type "qwen3_moe", Qwen3MoeForCausalLM:
// Qwen3-30B-A3B, Qwen3-235B-A22B): grouped-query attention with an explicit
// head_dim and per-head RMSNorm on queries and keys before RoPE, no biases,
// and MoE layers of SwiGLU experts behind a softmax top-k router (weights
// renormalised when norm_topk_prob), with dense SwiGLU layers where
// mlp_only_layers or decoder_sparse_step say so. Every constant comes from
// the file.
#ifndef FLOTILLA_SHARED_FAMILY_QWEN3_MOE_QWEN3_MOE_CONFIG_H_
#define FLOTILLA_SHARED_FAMILY_QWEN3_MOE_QWEN3_MOE_CONFIG_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace flotilla::model {

struct Qwen3MoeConfig {
  int hidden_size = 0;
  int intermediate_size = 0;      // dense layers' SwiGLU width
  int moe_intermediate_size = 0;  // each expert's width
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 0;
  double rope_theta = 10000;
  int num_experts = 0;
  int num_experts_per_tok = 0;
  bool norm_topk_prob = false;
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;
  bool tie_word_embeddings = false;
  std::vector<int32_t> eos_token_ids;

  // Upstream's rule: MoE unless listed in mlp_only_layers, and only every
  // decoder_sparse_step-th layer ((layer + 1) % step == 0).
  bool IsMoeLayer(int layer) const;
};

// Parses a config.json object of this family. Every bad field is named in
// one InvalidArgument: missing or mistyped fields, head counts that do not
// divide, top-k above the experts, mlp_only_layers out of range, features
// this engine does not run (attention_bias, sliding windows, scaled RoPE,
// an activation other than silu).
absl::StatusOr<Qwen3MoeConfig> ParseQwen3MoeConfig(const nlohmann::json& root,
                                                   absl::string_view source);

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_FAMILY_QWEN3_MOE_QWEN3_MOE_CONFIG_H_
