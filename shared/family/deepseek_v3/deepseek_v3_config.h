// config.json of DeepSeek-V3 / R1 and Kimi K2 (architectures
// "DeepseekV3ForCausalLM", model_type "deepseek_v3" or "kimi_k2"): MLA
// attention with a low-rank query (q_lora_rank) and key/value
// (kv_lora_rank), RoPE on qk_rope_head_dim dimensions with YaRN scaling,
// dense SwiGLU layers before first_k_dense_replace, then MoE layers of
// n_routed_experts SwiGLU experts of moe_intermediate_size behind a sigmoid
// router with e_score_correction_bias, group-limited top-k (n_group,
// topk_group), norm_topk_prob and routed_scaling_factor, plus
// n_shared_experts always-on experts; weights in FP8 e4m3 with 128x128
// block scales (quantization_config). Every constant comes from the file.
#ifndef FLOTILLA_SHARED_FAMILY_DEEPSEEK_V3_DEEPSEEK_V3_CONFIG_H_
#define FLOTILLA_SHARED_FAMILY_DEEPSEEK_V3_DEEPSEEK_V3_CONFIG_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace flotilla::model {

struct DeepSeekV3Config {
  int hidden_size = 0;
  int intermediate_size = 0;      // dense layers' SwiGLU width
  int moe_intermediate_size = 0;  // each routed and shared expert's width
  int num_hidden_layers = 0;      // decoder layers (the MTP layers apart)
  int num_attention_heads = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 0;
  int q_lora_rank = 0;  // 0: queries projected at full rank (q_proj)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int n_group = 0;
  int topk_group = 0;
  int first_k_dense_replace = 0;
  bool norm_topk_prob = false;
  float routed_scaling_factor = 1;
  int num_nextn_predict_layers = 0;  // MTP layers after the decoder layers
  bool tie_word_embeddings = false;
  double rope_theta = 10000;
  // RoPE on pairs (x0, x1), (x2, x3), ... (upstream's default) or on
  // halves (x_i, x_{i + rope/2}).
  bool rope_interleave = true;
  // YaRN (rope_scaling type "yarn"); factor 1 = no scaling.
  double yarn_factor = 1;
  int yarn_original_max_position = 0;
  double yarn_beta_fast = 32, yarn_beta_slow = 1;
  double yarn_mscale = 1, yarn_mscale_all_dim = 0;
  bool fp8 = false;  // quantization_config: FP8 e4m3, 128x128 blocks
  std::vector<int32_t> eos_token_ids;

  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // qk_head_dim^-0.5, times YaRN's mscale(factor, mscale_all_dim)^2 when
  // scaled, as the upstream attention computes its softmax scale.
  double SoftmaxScale() const;
  bool IsMoeLayer(int layer) const { return layer >= first_k_dense_replace; }
};

// Parses a config.json object of this family. Every bad field is named in
// one InvalidArgument: missing or mistyped fields, n_group not dividing
// n_routed_experts, topk_group above n_group, top-k above what the selected
// groups hold, first_k_dense_replace past the layers, a router other than
// sigmoid / noaux_tc, moe_layer_freq other than 1, RoPE scaling other than
// YaRN, quantization other than FP8 e4m3 in 128x128 blocks.
absl::StatusOr<DeepSeekV3Config> ParseDeepSeekV3Config(
    const nlohmann::json& root, absl::string_view source);

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_FAMILY_DEEPSEEK_V3_DEEPSEEK_V3_CONFIG_H_
