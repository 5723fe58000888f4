// Kimi K3 model configuration, read from config.json in either the flat form
// (every field at top level) or the released nested form (text_config and
// text_config.linear_attn_config). Every dimension the engine uses comes from
// here; nothing in a code path assumes the real model's sizes.
#ifndef FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_CONFIG_H_
#define FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/model/moe_spec.h"

namespace flotilla::model {

struct K3Config {
  int hidden_size = 0;        // E
  int num_hidden_layers = 0;  // layers
  int vocab_size = 0;         // V
  float rms_norm_eps = 0;     // eps of every RMSNorm
  // KDA (linear attention).
  int kda_num_heads = 0;  // H
  int kda_head_dim = 0;   // D (= d_k = d_v)
  int short_conv_kernel_size = 0;
  float gate_lower_bound = 0;  // g_min (negative)
  // MLA (full attention).
  int num_attention_heads = 0;
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool mla_use_output_gate = true;
  // MoE.
  int num_experts = 0;
  int num_experts_per_token = 0;  // top-k
  int num_shared_experts = 0;
  int routed_expert_hidden_size = 0;  // latent width
  int moe_intermediate_size = 0;      // expert FFN width I
  float routed_scaling_factor = 1;
  bool moe_renormalize = true;
  bool latent_moe_use_norm = true;
  int first_k_dense_replace = 0;
  int intermediate_size = 0;  // dense FFN width
  // Block attention residuals and activation.
  int attn_res_block_size = 0;
  float situ_beta = 0;
  float situ_linear_beta = 0;
  // One-based list of MLA layers, as in the file.
  std::vector<int> full_attn_layers;

  // Zero-based layer L uses MLA iff (L+1) is in full_attn_layers.
  bool IsMlaLayer(int layer) const;
  // Layer L uses a dense FFN iff L < first_k_dense_replace.
  bool IsDenseLayer(int layer) const { return layer < first_k_dense_replace; }
  // The routed experts: latent-width inputs, SiTU activation.
  MoeSpec Moe() const {
    MoeSpec m;
    m.num_layers = num_hidden_layers;
    m.first_moe_layer = first_k_dense_replace;
    m.num_experts = num_experts;
    m.num_experts_per_token = num_experts_per_token;
    m.hidden_size = routed_expert_hidden_size;
    m.intermediate_size = moe_intermediate_size;
    m.gate_clamp = situ_beta;
    m.up_clamp = situ_linear_beta;
    m.expert_names = {kK3TensorPrefix, &kBlockSparseMoeExperts};
    return m;
  }
};

// Parses config JSON text. On any problem returns InvalidArgument naming
// every missing, mistyped or out-of-range field at once. `source` (a path) is
// named in the message.
absl::StatusOr<K3Config> ParseK3Config(absl::string_view json_text,
                                       absl::string_view source);

// Reads and parses a config file.
absl::StatusOr<K3Config> LoadK3Config(const std::string& path);

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_CONFIG_H_
