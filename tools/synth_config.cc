#include "tools/synth_config.h"

#include <charconv>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace flotilla::tools {
namespace {

using model::K3Config;

// Constants every K3 variant shares with the release.
K3Config Base() {
  K3Config c;
  c.rms_norm_eps = 1e-5f;
  c.short_conv_kernel_size = 4;
  c.gate_lower_bound = -5.0f;
  c.mla_use_output_gate = true;
  c.routed_scaling_factor = 1.0f;
  c.moe_renormalize = true;
  c.latent_moe_use_norm = true;
  c.first_k_dense_replace = 1;
  c.situ_beta = 4.0f;
  c.situ_linear_beta = 25.0f;
  return c;
}

// ckpt_A's dimensions (tests/fixtures/k3/FORMAT.md section 1): every feature of
// the model at a size that loads and runs in milliseconds.
K3Config Tiny() {
  K3Config c = Base();
  c.hidden_size = 128;
  c.num_hidden_layers = 13;
  c.vocab_size = 256;
  c.kda_num_heads = 4;
  c.kda_head_dim = 16;
  c.num_attention_heads = 4;
  c.q_lora_rank = 64;
  c.kv_lora_rank = 32;
  c.qk_nope_head_dim = 24;
  c.qk_rope_head_dim = 8;
  c.v_head_dim = 16;
  c.num_experts = 8;
  c.num_experts_per_token = 2;
  c.num_shared_experts = 2;
  c.routed_expert_hidden_size = 64;
  c.moe_intermediate_size = 64;
  c.intermediate_size = 96;
  c.attn_res_block_size = 3;
  c.full_attn_layers = {4, 8, 12, 13};
  return c;
}

// A mid-size model for streaming benchmarks: real-shaped layers (MLA every
// fourth layer and the last two, layer 0 dense, 1.25 MB experts) at about
// 0.6% of the real size.
K3Config Bench() {
  K3Config c = Base();
  c.hidden_size = 2048;
  c.num_hidden_layers = 24;
  c.vocab_size = 32768;
  c.kda_num_heads = 16;
  c.kda_head_dim = 128;
  c.num_attention_heads = 16;
  c.q_lora_rank = 512;
  c.kv_lora_rank = 256;
  c.qk_nope_head_dim = 64;
  c.qk_rope_head_dim = 32;
  c.v_head_dim = 64;
  c.num_experts = 256;
  c.num_experts_per_token = 8;
  c.num_shared_experts = 2;
  c.routed_expert_hidden_size = 1024;
  c.moe_intermediate_size = 768;
  c.intermediate_size = 9728;
  c.attn_res_block_size = 4;
  c.full_attn_layers = {4, 8, 12, 16, 20, 23, 24};
  return c;
}

// tests/fixtures/k3/real-config.reconstructed.json.
K3Config Full() {
  K3Config c = Base();
  c.hidden_size = 7168;
  c.num_hidden_layers = 93;
  c.vocab_size = 163840;
  c.kda_num_heads = 96;
  c.kda_head_dim = 128;
  c.num_attention_heads = 96;
  c.q_lora_rank = 1536;
  c.kv_lora_rank = 512;
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 128;
  c.num_experts = 896;
  c.num_experts_per_token = 16;
  c.num_shared_experts = 2;
  c.routed_expert_hidden_size = 3584;
  c.moe_intermediate_size = 3072;
  c.intermediate_size = 33792;
  c.attn_res_block_size = 12;
  for (int l = 4; l <= 92; l += 4) c.full_attn_layers.push_back(l);
  c.full_attn_layers.push_back(93);
  return c;
}

// The shortest decimal that reads back as the same float, as a double:
// 1e-5f is written "1e-05", not "9.999999747378752e-06".
double ShortestFloat(float f) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf) - 1, f);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

}  // namespace

const std::vector<SynthPreset>& SynthPresets() {
  static const std::vector<SynthPreset> presets = {
      {"k3-tiny", "ckpt_A's dimensions: 13 layers, hidden 128 (~4 MB)", false},
      {"k3-bench", "24 layers, hidden 2048, 256 experts of 1.25 MB (~9.3 GB)",
       false},
      {"k3-full", "the real 93-layer K3 (~1.5 TB; needs --force)", true},
  };
  return presets;
}

absl::StatusOr<model::K3Config> SynthPresetConfig(const std::string& name) {
  if (name == "k3-tiny") return Tiny();
  if (name == "k3-bench") return Bench();
  if (name == "k3-full") return Full();
  std::string names;
  for (const SynthPreset& p : SynthPresets()) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", p.name);
  }
  return absl::NotFoundError(
      absl::StrCat("unknown preset '", name, "' (presets: ", names, ")"));
}

std::string NestedConfigJson(const K3Config& c) {
  using ordered = nlohmann::ordered_json;
  std::vector<int> kda_layers;
  for (int l = 1; l <= c.num_hidden_layers; ++l) {
    if (!c.IsMlaLayer(l - 1)) kda_layers.push_back(l);
  }
  ordered lac = {{"num_heads", c.kda_num_heads},
                 {"head_dim", c.kda_head_dim},
                 {"short_conv_kernel_size", c.short_conv_kernel_size},
                 {"gate_lower_bound", ShortestFloat(c.gate_lower_bound)},
                 {"use_full_rank_gate", true},
                 {"full_attn_layers", c.full_attn_layers},
                 {"kda_layers", kda_layers}};
  ordered tc = {
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"vocab_size", c.vocab_size},
      {"rms_norm_eps", ShortestFloat(c.rms_norm_eps)},
      {"num_attention_heads", c.num_attention_heads},
      {"q_lora_rank", c.q_lora_rank},
      {"kv_lora_rank", c.kv_lora_rank},
      {"qk_nope_head_dim", c.qk_nope_head_dim},
      {"qk_rope_head_dim", c.qk_rope_head_dim},
      {"v_head_dim", c.v_head_dim},
      {"mla_use_output_gate", c.mla_use_output_gate},
      {"num_experts", c.num_experts},
      {"num_experts_per_token", c.num_experts_per_token},
      {"num_shared_experts", c.num_shared_experts},
      {"num_expert_group", 1},
      {"routed_expert_hidden_size", c.routed_expert_hidden_size},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"routed_scaling_factor", ShortestFloat(c.routed_scaling_factor)},
      {"moe_renormalize", c.moe_renormalize},
      {"latent_moe_use_norm", c.latent_moe_use_norm},
      {"first_k_dense_replace", c.first_k_dense_replace},
      {"intermediate_size", c.intermediate_size},
      {"attn_res_block_size", c.attn_res_block_size},
      {"activation_situ_beta", ShortestFloat(c.situ_beta)},
      {"activation_situ_linear_beta", ShortestFloat(c.situ_linear_beta)},
      {"linear_attn_config", lac},
      {"tie_word_embeddings", false},
      {"num_nextn_predict_layers", 0},
  };
  // Where the release keeps quantization_config is not recorded; the root
  // is where Hugging Face writers put it, and the config reader checks both.
  ordered root = {{"text_config", tc},
                  {"quantization_config", {{"group_size", 32}}}};
  return root.dump(1) + "\n";
}

absl::Status CheckSynthesizable(const K3Config& c) {
  // MXFP4 stores 32-element groups along each expert matrix's input width:
  // the latent width for w1/w3, the expert width for w2.
  if (c.routed_expert_hidden_size % 32 != 0 ||
      c.moe_intermediate_size % 32 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("routed_expert_hidden_size (", c.routed_expert_hidden_size,
                     ") and moe_intermediate_size (", c.moe_intermediate_size,
                     ") must be multiples of 32 (the MXFP4 group)"));
  }
  return absl::OkStatus();
}

}  // namespace flotilla::tools
